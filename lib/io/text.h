/* text.h: declarations shared by the file readers (lib/io/): the format
 * parsers and a bounds-checked cursor for text. */
#ifndef HICP_IO_TEXT_H
#define HICP_IO_TEXT_H

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

/* Number parsing independent of the process's locale ("1.5" always means
 * one and a half).  Returns 0, HICP_EFORMAT (not a number) or
 * HICP_ENONFINITE (nan, inf, or out of range). */
int hicp__parse_double(const char *token, double *out);

/* A cursor over text: the current position, the end, the line number. */
typedef struct hicp__text {
  const unsigned char *p, *end;
  size_t line; /* 1-based */
  const char *name;
  hicp_context *ctx;
} hicp__text;

void hicp__text_init(hicp__text *t, hicp_context *ctx, const char *name, const unsigned char *p,
                     const unsigned char *end, size_t first_line);
/* Skips blanks (spaces, tabs, \r) but not newlines. */
void hicp__text_skip_blanks(hicp__text *t);
/* Skips blanks, newlines and comments starting with `comment` (0: none). */
void hicp__text_skip_space(hicp__text *t, char comment);
/* Moves past the next newline (or to the end). */
void hicp__text_next_line(hicp__text *t);
/* 1 at the end of the line (newline, comment char or end of buffer). */
int hicp__text_at_eol(const hicp__text *t, char comment);
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
/* Checks that every triangle index is below raw->n. */
int hicp__raw_check_triangles(hicp_context *ctx, const char *name, const hicp__raw_cloud *raw);

#endif /* HICP_IO_TEXT_H */
