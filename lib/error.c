/* error.c: error codes, messages and the per-context last error. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "context.h"

const char *hicp_strerror(int code)
{
  switch (code) {
#define HICP_X_CASE_(name, value, msg) \
  case value:                          \
    return msg;
    HICP_ERROR_TABLE(HICP_X_CASE_)
#undef HICP_X_CASE_
  default:
    return "unknown error";
  }
}

/* Messages end up on a terminal after "hicp: ", and many quote the input
 * (a header line, a token, a path): one line, and no control characters,
 * which a crafted file could use to drive the terminal (escape sequences).
 * Line breaks and tabs become spaces, other C0 controls and DEL '?', and so
 * do the C1 controls as UTF-8 writes them (0xC2 0x80-0x9F: U+009B is an
 * escape sequence's introducer on some terminals); other UTF-8, such as a
 * path's accented letters, is kept. */
static void one_clean_line(char *s)
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

/* The workers of one pass (a "hybrid" team: a CPU worker and one per
 * device) run at once on the caller's context, and two of them may fail at
 * once: each message is made whole in a buffer of its own and copied in
 * under this lock, so that the context keeps one of them intact rather
 * than the two interleaved.  Errors are rare, so one lock for every
 * context costs nothing that matters. */
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

static void set_message(hicp_context *ctx, const char *msg)
{
  const size_t n = strnlen(msg, sizeof ctx->err - 1);
  pthread_mutex_lock(&err_lock);
  memcpy(ctx->err, msg, n);
  ctx->err[n] = '\0';
  pthread_mutex_unlock(&err_lock);
}

int hicp__vfail(hicp_context *ctx, int code, const char *fmt, va_list ap)
{
  if (ctx != NULL) {
    char msg[HICP_ERRMSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    one_clean_line(msg);
    set_message(ctx, msg);
  }
  return code;
}

int hicp__fail(hicp_context *ctx, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  hicp__vfail(ctx, code, fmt, ap);
  va_end(ap);
  return code;
}

int hicp__fail_prefix(hicp_context *ctx, int code, const char *what)
{
  if (ctx != NULL && what != NULL && what[0] != '\0') {
    char tmp[HICP_ERRMSG_MAX];
    pthread_mutex_lock(&err_lock);
    snprintf(tmp, sizeof tmp, "%.150s: %.350s", what, ctx->err[0] ? ctx->err : hicp_strerror(code));
    one_clean_line(tmp);
    memcpy(ctx->err, tmp, sizeof tmp);
    pthread_mutex_unlock(&err_lock);
  }
  return code;
}

void hicp__clear_error(hicp_context *ctx)
{
  if (ctx != NULL)
    set_message(ctx, "");
}

const char *hicp_context_error(const hicp_context *ctx)
{
  return ctx != NULL ? ctx->err : "no context";
}
