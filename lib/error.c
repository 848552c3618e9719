/* error.c: error codes, messages and the per-context last error. */
#include "config.h"

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

int hicp__vfail(hicp_context *ctx, int code, const char *fmt, va_list ap)
{
  if (ctx != NULL) {
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    /* One line: messages end up on a terminal after "hicp: ". */
    for (char *c = ctx->err; *c != '\0'; c++)
      if (*c == '\n' || *c == '\r')
        *c = ' ';
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
    snprintf(tmp, sizeof tmp, "%.150s: %.350s", what, ctx->err[0] ? ctx->err : hicp_strerror(code));
    memcpy(ctx->err, tmp, sizeof tmp);
  }
  return code;
}

void hicp__clear_error(hicp_context *ctx)
{
  if (ctx != NULL)
    ctx->err[0] = '\0';
}

const char *hicp_context_error(const hicp_context *ctx)
{
  return ctx != NULL ? ctx->err : "no context";
}
