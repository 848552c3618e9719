/* oneline.h: messages made one clean line, for the library's messages
 * (lib/error.c) and the CLI's own (tools/cli_util.c).
 *
 * Messages end up on a terminal after "hicp: ", and many quote the input
 * (a header line, a token, a path): one line, and no control characters,
 * which a crafted file or file name could use to drive the terminal
 * (escape sequences).  Line breaks and tabs become spaces, other C0
 * controls and DEL '?', and so do the C1 controls as UTF-8 writes them
 * (0xC2 0x80-0x9F: U+009B is an escape sequence's introducer on some
 * terminals); other UTF-8, such as a path's accented letters, is kept. */
#ifndef HICP_ONELINE_H
#define HICP_ONELINE_H

static inline void hicp__one_clean_line(char *s)
{
  for (unsigned char *c = (unsigned char *)s; *c != '\0'; c++) {
    if (*c == '\n' || *c == '\r' || *c == '\t')
      *c = ' ';
    else if (*c < 0x20 || *c == 0x7f)
      *c = '?';
    else if (*c == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f)
      c[0] = c[1] = '?';
  }
}

#endif /* HICP_ONELINE_H */
