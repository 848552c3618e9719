/* xyz_read.c: text point lists (.xyz, .txt, .csv, .pts, .asc): the first
 * three numbers of each line are x, y, z; further columns (normals, colours)
 * are ignored.  Separators: blanks, commas, semicolons, one kind a line
 * (blanks may pad a comma or semicolon): a line that mixes them, as a
 * decimal comma does ("1,5;2,5;3,5" or "1,5 2,5 3,5"), is refused rather
 * than read as other numbers, and so is an empty field (",," or a leading
 * comma), which is a missing value, not a separator.  Blank lines and
 * lines starting with '#' or '//' are skipped; one header line of names
 * ("x,y,z") is allowed before the first point, a line whose first word is
 * not a number (a line that starts with one and then fails is an error,
 * as it is anywhere else).  A header that names columns x, y and z (any
 * case, quoted or not; ParaView's Points:0, :1, :2) has them read wherever
 * they are, "id,x,y,z" or pandas' ",x,y,z" (its index column unnamed);
 * one that names some of them but not all is refused; one that names
 * none leaves the first three.  A UTF-8 byte order mark at the start (which
 * spreadsheets write into CSV files) is skipped.  In a .pts file (Leica's
 * format) a line holding one whole number is the count of the points that
 * follow, up to the next such line, and is checked.  A NUL byte anywhere in
 * a line is refused: it marks binary data, not text. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "io/text.h"

#define MAX_COLUMNS 4096 /* a header's columns looked at for x, y and z */

static int comment_line(const hicp__text *t)
{
  return t->p < t->end && (*t->p == '#' || (*t->p == '/' && t->p + 1 < t->end && t->p[1] == '/'));
}

/* Moves past the blanks, commas and semicolons before a field; *kind gets
 * the separator's kind (' ' for blanks alone, ',' or ';'), and the result
 * is how many commas and semicolons it held (more than one: a field was
 * empty; two different ones: kind 'x'). */
static int skip_separator(hicp__text *t, char *kind)
{
  int marks = 0;
  *kind = ' ';
  hicp__text_skip_blanks(t);
  while (t->p < t->end && (*t->p == ',' || *t->p == ';')) {
    *kind = marks == 0 || *t->p == *kind ? (char)*t->p : 'x';
    marks++;
    t->p++;
    hicp__text_skip_blanks(t);
  }
  return marks;
}

static const char *kind_name(char kind)
{
  return kind == ' ' ? "blanks" : kind == ',' ? "','" : "';'";
}

/* A field separator of another kind than the line's first (sep, or 0
 * before the line's second field): a decimal comma, most likely. */
static int check_separator(hicp__text *t, char *sep, char kind)
{
  if (*sep == 0)
    *sep = kind;
  if (kind == *sep)
    return HICP_OK;
  if (kind == 'x' || *sep == 'x')
    return hicp__fail(t->ctx, HICP_EFORMAT,
                      "%s line %zu: ',' and ';' between the same two fields (a decimal comma? "
                      "numbers are read with a decimal point)",
                      t->name, t->line);
  return hicp__fail(t->ctx, HICP_EFORMAT,
                    "%s line %zu: fields separated by both %s and %s (a decimal comma? numbers "
                    "are read with a decimal point)",
                    t->name, t->line, kind_name(*sep), kind_name(kind));
}

/* 1 if the line's first field (after any empty ones) reads as a number;
 * the cursor is not moved. */
static int starts_with_a_number(hicp__text *t)
{
  const unsigned char *at = t->p;
  char kind, tok[128];
  double v;
  skip_separator(t, &kind);
  const int number = hicp__text_token(t, ",;", tok, sizeof tok) > 0 &&
                     hicp__parse_double(tok, &v) != HICP_EFORMAT;
  t->p = at;
  return number;
}

/* The axis (0, 1, 2) a header's column name stands for, or -1. */
static int axis_of(const char *tok)
{
  char n[32];
  size_t len = strlen(tok);
  if (len >= 2 && (tok[0] == '"' || tok[0] == '\'') && tok[len - 1] == tok[0]) {
    tok++;
    len -= 2;
  }
  if (len == 0 || len >= sizeof n)
    return -1;
  memcpy(n, tok, len);
  n[len] = '\0';
  static const char *const names[3][2] = {{"x", "points:0"}, {"y", "points:1"}, {"z", "points:2"}};
  for (int a = 0; a < 3; a++)
    for (int k = 0; k < 2; k++)
      if (strcasecmp(n, names[a][k]) == 0)
        return a;
  return -1;
}

/* The column a field starts after `marks` commas or semicolons: an empty
 * field (pandas' unnamed index column, ",x,y,z") is a column too, so each
 * mark moves one column on; blanks alone separate one. */
static int next_column(int c, int first, int marks)
{
  return c + (first ? marks + 1 : marks > 0 ? marks : 1);
}

/* The columns of the line at t (at most MAX_COLUMNS + 1), counted as
 * read_header counts a header's; the cursor is not moved. */
static int line_columns(hicp__text *t)
{
  const unsigned char *at = t->p;
  char kind, tok[128];
  int c = -1;
  for (int first = 1; c < MAX_COLUMNS; first = 0) {
    const int marks = skip_separator(t, &kind);
    if (t->p < t->end && *t->p == '\0')
      break; /* the line's reading says so */
    if (hicp__text_at_eol(t, 0))
      break;
    c = next_column(c, first, marks);
    hicp__text_token(t, ",;", tok, sizeof tok);
  }
  t->p = at;
  return c + 1;
}

/* The first field of the line at t: 1 and *v a whole number (no point or
 * exponent, below 2^53), 0 another number (nan and inf among them, which
 * the reading of a coordinate refuses), -1 no number (a name, quoted or
 * not).  The cursor is not moved. */
static int first_field(hicp__text *t, double *v)
{
  const unsigned char *at = t->p;
  char kind, tok[128];
  skip_separator(t, &kind);
  const size_t len = hicp__text_token(t, ",;", tok, sizeof tok);
  t->p = at;
  const int rc = len == 0 || len >= sizeof tok ? HICP_EFORMAT : hicp__parse_double(tok, v);
  if (rc == HICP_ENONFINITE)
    return 0;
  if (rc != HICP_OK)
    return -1;
  return strpbrk(tok, ".eE") == NULL && *v > -9007199254740992.0 && *v < 9007199254740992.0;
}

/* What the first column of a table is whose rows have one column more
 * than its header names (the line at t its first row; the cursor is not
 * moved):
 *  2  the rows' names: no number (R's quoted names);
 *  1  the rows' index: whole numbers counting up by one from this row to
 *     the next (R's 1, 2, ...; pandas' 0, 1, ...), or a lone row's 0 or 1;
 *     every later row must go on counting (hicp__parse_xyz checks);
 *  0  a coordinate, the unnamed column after the named ones (an intensity
 *     or a label): a number with a point or an exponent, which no index
 *     is (stop 63's review: "x,y,z" over "1.5,2.5,3.5,0.7" read the point
 *     (2.5, 3.5, 0.7));
 * -1  either: whole numbers that do not count up by one, as an index of
 *     filtered or sorted rows (3, 7, 12) and as whole coordinates would. */
static int rows_named(hicp__text *t)
{
  double a, b;
  const int first = first_field(t, &a);
  if (first != 1)
    return first < 0 ? 2 : 0;
  hicp__text s = *t;
  for (;;) { /* the next row, past blank and comment lines */
    hicp__text_next_line(&s);
    hicp__text_skip_blanks(&s);
    if (s.p >= s.end)
      return a == 0.0 || a == 1.0 ? 1 : -1;
    if (!hicp__text_at_eol(&s, 0) && !comment_line(&s))
      break;
  }
  return first_field(&s, &b) == 1 && b == a + 1.0 ? 1 : -1;
}

/* The header line at t (its first word not a number): the columns of x, y
 * and z when it names all three (col[]; *ncols the header's columns, 0
 * past MAX_COLUMNS), the first three when it names none (*ncols 0); one
 * that names some is refused.  Leaves t at the line's end. */
static int read_header(hicp__text *t, int col[3], int *ncols)
{
  int found[3] = {-1, -1, -1}, named = 0;
  char tok[128];
  *ncols = 0;
  int c = -1;
  for (int first = 1;; first = 0) {
    char kind;
    const int marks = skip_separator(t, &kind);
    int rc = hicp__text_check_nul(t);
    if (rc != HICP_OK)
      return rc;
    if (hicp__text_at_eol(t, 0))
      break;
    c = next_column(c, first, marks);
    if (c >= MAX_COLUMNS)
      break; /* x, y and z are read among the first MAX_COLUMNS columns */
    hicp__text_token(t, ",;", tok, sizeof tok);
    const int a = axis_of(tok);
    if (a >= 0 && found[a] < 0) {
      found[a] = c;
      named++;
    }
  }
  if (named == 3) {
    for (int a = 0; a < 3; a++)
      col[a] = found[a];
    *ncols = c < MAX_COLUMNS ? c + 1 : 0;
    return HICP_OK;
  }
  if (named > 0) {
    static const char *const axes = "xyz";
    char list[16] = "";
    for (int a = 0, n = 0; a < 3; a++)
      if (found[a] >= 0) {
        const size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%c", n++ == 0 ? "" : named == 2 ? " and " : ", ",
                 axes[a]);
      }
    return hicp__fail(t->ctx, HICP_EFORMAT,
                      "%s line %zu: the header names column%s %s but not all of x, y and z",
                      t->name, t->line, named == 1 ? "" : "s", list);
  }
  return HICP_OK;
}

/* The last column read (*last) and each column's axis up to it (-1: a
 * column between them, read past), from the columns of x, y and z. */
static void set_columns(const int col[3], int *last, int axis_at[MAX_COLUMNS])
{
  *last = col[0] > col[1] ? col[0] : col[1];
  *last = col[2] > *last ? col[2] : *last;
  for (int c = 0; c <= *last; c++)
    axis_at[c] = c == col[0] ? 0 : c == col[1] ? 1 : c == col[2] ? 2 : -1;
}

int hicp__xyz_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len)
{
  const unsigned char *nul = memchr(buf, '\0', len);
  if (nul == NULL)
    return HICP_OK;
  /* The parser on the head up to the end of the NUL's line: it fails there
   * at the latest, and at an earlier line where the whole file would (the
   * NUL's own line alone reported a NUL after a line the parser refuses
   * first: stop 63's review). */
  size_t cut = (size_t)(nul - buf);
  while (cut < len && buf[cut] != '\n' && buf[cut] != '\r')
    cut++;
  hicp__raw_cloud raw;
  memset(&raw, 0, sizeof raw);
  const int rc = hicp__parse_xyz(ctx, name, buf, cut, &raw);
  hicp__raw_cloud_free(&raw);
  return rc;
}

int hicp__parse_xyz(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out)
{
  /* A point line takes at least 6 bytes ("0 0 0\n"); lines bound it too. */
  size_t lines = 1;
  for (size_t i = 0; i < len; i++) /* "\n", "\r\n" or a lone "\r" (text.c) */
    lines += buf[i] == '\n' || (buf[i] == '\r' && (i + 1 == len || buf[i + 1] != '\n'));
  int rc = hicp__raw_reserve_points(ctx, name, out, lines < len / 6 + 1 ? lines : len / 6 + 1);
  if (rc != HICP_OK)
    return rc;
  const char *dot = name != NULL ? strrchr(name, '.') : NULL;
  const int pts = dot != NULL && strcasecmp(dot, ".pts") == 0;
  /* a .pts count line: the points it announced, where it was, and the
   * points read since (none yet: SIZE_MAX) */
  size_t count = SIZE_MAX, count_line = 0, since = 0;
  hicp__text t;
  hicp__text_init(&t, ctx, name, buf, buf + len, 1);
  int seen_data = 0, seen_header = 0;
  /* the columns of x, y and z (a header may name others), the last one
   * read, and each column's axis (-1: a column between them, read past) */
  int col[3] = {0, 1, 2}, last = 2, axis_at[MAX_COLUMNS];
  for (int c = 0; c < 3; c++)
    axis_at[c] = c;
  int header_cols = 0; /* a header that named x, y and z: its columns, until
                          the first line after it is read */
  int counting = 0;     /* the first column is the rows' index, counting up */
  double index = 0.0;   /* the last row's */
  while (t.p < t.end) {
    hicp__text_skip_blanks(&t);
    if (hicp__text_at_eol(&t, 0) || comment_line(&t)) {
      if ((rc = hicp__text_skip_line(&t)) != HICP_OK)
        return rc;
      continue;
    }
    if (!seen_data && !seen_header && count == SIZE_MAX && !starts_with_a_number(&t)) {
      /* a header of column names */
      seen_header = 1;
      if ((rc = read_header(&t, col, &header_cols)) != HICP_OK)
        return rc;
      set_columns(col, &last, axis_at);
      if ((rc = hicp__text_skip_line(&t)) != HICP_OK)
        return rc;
      continue;
    }
    if (header_cols > 0) { /* the first line after a header that named x, y and z */
      /* One column more than the header names, where the rows' names or
       * index come first without a name of their own (R's write.table;
       * pandas' to_csv with blanks or tabs, whose empty first name reads
       * as padding): the named columns are one further on, as R's
       * read.table takes them.  Read as named, x would be the index. */
      const int named = header_cols < MAX_COLUMNS && line_columns(&t) == header_cols + 1
                            ? rows_named(&t)
                            : 0;
      if (named < 0)
        return hicp__fail(ctx, HICP_EFORMAT,
                          "%s line %zu: one column more than the header names, whose first "
                          "holds whole numbers that do not count the rows: an index or x? "
                          "Name every column in the header",
                          name, t.line);
      if (named > 0) {
        for (int a = 0; a < 3; a++)
          col[a]++;
        set_columns(col, &last, axis_at);
      }
      if (named == 1)
        first_field(&t, &index); /* the first row's, which the next rows go on from */
      counting = named == 1;
      header_cols = 0; /* decided once, for the whole table */
    } else if (counting) {
      /* Every row of an index table goes on counting: the first two rows
       * alone decided, and a table whose first column counted there by
       * chance (whole coordinates, 0 then 1) was read a column off (stop
       * 63's review of this rule). */
      double next;
      if (first_field(&t, &next) != 1 || next != index + 1.0)
        return hicp__fail(ctx, HICP_EFORMAT,
                          "%s line %zu: the first column, taken for the rows' index (one column "
                          "more than the header names), does not count on here; name every "
                          "column in the header",
                          name, t.line);
      index = next;
    }
    double v[3];
    char tok[128];
    char sep = 0; /* the line's separator kind, from its second field */
    int k = 0;    /* fields read */
    for (; k <= last; k++) {
      char kind;
      const int marks = skip_separator(&t, &kind);
      if ((rc = hicp__text_check_nul(&t)) != HICP_OK)
        return rc;
      if (hicp__text_at_eol(&t, 0))
        break;
      if (marks > (k > 0))
        return hicp__fail(ctx, HICP_EFORMAT, "%s line %zu: field %d is empty", name, t.line,
                          k + 1);
      if (k > 0 && (rc = check_separator(&t, &sep, kind)) != HICP_OK)
        return rc;
      if (axis_at[k] < 0) { /* a column the header names otherwise: any text */
        hicp__text_token(&t, ",;", tok, sizeof tok);
        continue;
      }
      if ((rc = hicp__text_number_token(&t, ",;", "a number", tok, sizeof tok)) != HICP_OK)
        return rc;
      int prc = hicp__parse_double(tok, &v[axis_at[k]]);
      if (prc == HICP_ENONFINITE)
        return hicp__fail(ctx, prc, "%s line %zu: non-finite coordinate '%.*s'", name, t.line,
                          hicp__utf8_prec(tok, 24), tok);
      if (prc != HICP_OK)
        return hicp__fail(ctx, HICP_EFORMAT, "%s line %zu: expected a number, got '%.*s'", name,
                          t.line, hicp__utf8_prec(tok, 24), tok);
    }
    if (k == 1 && pts && axis_at[0] == 0 && v[0] >= 0 && v[0] <= 4e18 &&
        v[0] == (double)(uint64_t)v[0] && strpbrk(tok, ".eE") == NULL) {
      if (count != SIZE_MAX && since != count)
        return hicp__fail(ctx, HICP_EFORMAT, "%s line %zu: a count of %zu points, but %zu follow",
                          name, count_line, count, since);
      count = (size_t)v[0];
      count_line = t.line;
      since = 0;
      k = -1;
    }
    if (k >= 0 && k <= last && last == 2)
      return hicp__fail(ctx, HICP_EFORMAT, "%s line %zu: expected 3 coordinates, found %d", name,
                        t.line, k);
    if (k >= 0 && k <= last)
      return hicp__fail(ctx, HICP_EFORMAT,
                        "%s line %zu: expected %d fields (x, y and z in columns %d, %d and %d, as "
                        "the header names them), found %d",
                        name, t.line, last + 1, col[0] + 1, col[1] + 1, col[2] + 1, k);
    if (k == last + 1) {
      /* a further column after a comma or semicolon of another kind:
       * "1;2;3,5" is z = 3.5 with a decimal comma, not 3 and a column to
       * ignore (blanks before a comment or a label are not checked) */
      char kind;
      if (skip_separator(&t, &kind) > 0 && !hicp__text_at_eol(&t, 0) &&
          (rc = check_separator(&t, &sep, kind)) != HICP_OK)
        return rc;
      memcpy(&out->xyz[3 * out->n], v, sizeof v);
      out->n++;
      seen_data = 1;
      since++;
    }
    /* further columns are ignored, but a NUL byte among them is no text */
    if ((rc = hicp__text_skip_line(&t)) != HICP_OK)
      return rc;
  }
  if (count != SIZE_MAX && since != count)
    return hicp__fail(ctx, HICP_EFORMAT, "%s line %zu: a count of %zu points, but %zu follow", name,
                      count_line, count, since);
  return HICP_OK;
}
