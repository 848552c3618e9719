/* text.h: declarations shared by the file readers (lib/io/): the format
 * parsers and a bounds-checked cursor for text. */
#ifndef HICP_IO_TEXT_H
#define HICP_IO_TEXT_H

#include <locale.h>

#include <stddef.h>
#include <stdint.h>

#include "cloud.h"

/* Each parser reads a whole file held in memory (buf[len] is a NUL byte, so
 * text scanning can stop on it) and fills *out; on failure it frees what it
 * allocated and returns a HICP_E* code with a message naming `name`. */
int hicp__parse_ply(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out);
int hicp__parse_pcd(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out);
int hicp__parse_off(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out);
int hicp__parse_xyz(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out);

/* Each parser's first step, on a file's head (its first bytes, not the
 * whole file): HICP_OK, or the failure that reading the whole file would
 * give at that step, with the parser's own message.  A step the head
 * cannot decide (a first line or word that goes on past it) is HICP_OK:
 * the whole file decides.  A PLY's first line, a PCD's first key, an
 * OFF's first word; for text (XYZ), a NUL byte anywhere, which the parser
 * refuses wherever it is. */
int hicp__ply_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len);
int hicp__pcd_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len);
int hicp__off_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len);
int hicp__xyz_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len);

/* The C locale's numbers, for reading and writing numbers as files hold
 * them whatever the application's locale ((locale_t)0 if it cannot be
 * made). */
locale_t hicp__c_locale(void);

/* Number parsing independent of the process's locale ("1.5" always means
 * one and a half).  Returns 0, HICP_EFORMAT (not a number) or
 * HICP_ENONFINITE (nan, inf, or out of range). */
int hicp__parse_double(const char *token, double *out);

/* 1 if the token spells a NaN as printf writes one ("nan", "NaN", "-nan",
 * any case, either sign): a missing measurement in PLY and PCD files. */
int hicp__is_nan_token(const char *token);

/* A cursor over text: the current position, the end, the line number. */
typedef struct hicp__text {
  const unsigned char *p, *end;
  size_t line; /* 1-based */
  const char *name;
  hicp_context *ctx;
} hicp__text;

void hicp__text_init(hicp__text *t, hicp_context *ctx, const char *name, const unsigned char *p,
                     const unsigned char *end, size_t first_line);
/* A file head's first word after blank lines and '#' comments, read as
 * the PCD and OFF parsers read theirs (a cursor t over the head, left past
 * it): 1 where it ends within the head, 0 where it may go on past it. */
int hicp__text_head_word(hicp__text *t, hicp_context *ctx, const char *name,
                         const unsigned char *buf, size_t len, char *word, size_t wordlen);

/* Skips blanks (spaces, tabs, \r) but not newlines. */
void hicp__text_skip_blanks(hicp__text *t);
/* Skips blanks, newlines and comments starting with `comment` (0: none). */
void hicp__text_skip_space(hicp__text *t, char comment);
/* Moves past the next newline (or to the end). */
void hicp__text_next_line(hicp__text *t);
/* 1 at the end of the line (newline, comment char or end of buffer). */
int hicp__text_at_eol(const hicp__text *t, char comment);
/* Fails "NAME line N: a NUL byte in a text file" if the cursor is at a NUL
 * byte inside the buffer (one that is not the terminator past its end);
 * HICP_OK otherwise.  hicp__text_at_eol takes a NUL for a line end, so a
 * reader calls this where it would otherwise stop on one silently. */
int hicp__text_check_nul(const hicp__text *t);
/* Moves past the rest of the line (columns a reader ignores) and its end,
 * as hicp__text_next_line; a NUL byte on the way is refused as above. */
int hicp__text_skip_line(hicp__text *t);
/* The number of tokens (as hicp__text_token reads them) from `from` to the
 * end of its line; the cursor is not moved. */
size_t hicp__text_count_tokens(const hicp__text *t, const unsigned char *from, const char *seps);
/* After the last record a file declares: only blanks, line ends and
 * comments (`comment`, 0: none) may follow.  Anything else fails
 * "NAME line N: data after WHAT" (what: "the 3 declared points", say). */
int hicp__text_expect_end(hicp__text *t, char comment, const char *what);
/* Reads the next token (delimited by blanks, newlines, `seps`) into tok
 * (truncated to toklen - 1).  Returns its length, 0 at end of line/buffer. */
size_t hicp__text_token(hicp__text *t, const char *seps, char *tok, size_t toklen);
/* Reads the token of a number, as hicp__text_token; one longer than tok
 * holds is refused ("NAME line N: expected WHAT, got K characters"), since
 * cut short it could read as another number ("0.000...0005e140" as 0). */
int hicp__text_number_token(hicp__text *t, const char *seps, const char *what, char *tok,
                            size_t toklen);
/* Reads a number token on the current line (skip_newlines: anywhere after);
 * on failure reports "NAME line N: expected WHAT, got 'x'". */
int hicp__text_number(hicp__text *t, int skip_newlines, char comment, const char *what,
                      double *out);
/* Reads a non-negative integer count (at most `max`), as above. */
int hicp__text_count(hicp__text *t, int skip_newlines, char comment, const char *what,
                     uint64_t max, uint64_t *out);

/* Growable arrays for the raw cloud, charged to the memory budget. */
int hicp__raw_reserve_points(hicp_context *ctx, const char *name, hicp__raw_cloud *raw,
                             size_t n);
int hicp__raw_push_triangle(hicp_context *ctx, const char *name, hicp__raw_cloud *raw,
                            size_t *cap, uint32_t a, uint32_t b, uint32_t c);
/* Checks a point as the file numbers it (index: its record, counting the
 * points a reader drops), with hicp__check_point's messages ("NAME: point
 * I has a non-finite coordinate", "... of magnitude ..."): checked later,
 * in the kept cloud, the number would be wrong after a dropped point. */
int hicp__raw_check_point(hicp_context *ctx, const char *name, uint64_t index, const double v[3]);
/* Checks that every triangle index is below raw->n. */
int hicp__raw_check_triangles(hicp_context *ctx, const char *name, const hicp__raw_cloud *raw);

#endif /* HICP_IO_TEXT_H */
