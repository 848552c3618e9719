/* error.c: error codes, messages and the per-context last error. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "context.h"
#include "oneline.h"

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

/* The workers of one pass (a "hybrid" team: a CPU worker and one per
 * device) run at once on the caller's context, and two of them may fail at
 * once: each message is made whole in a buffer of its own and copied in
 * under this lock, so that the context keeps one of them intact rather
 * than the two interleaved.  Errors are rare, so one lock for every
 * context costs nothing that matters. */
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

/* A fork() while another thread held err_lock left it locked in the child
 * for good, and the child's first call that set or cleared a message
 * (every registration's first step) waited for ever (an integrator's
 * review: 311 of 2,000 children).  The child, one thread, makes the lock
 * anew; a message half copied at the fork is only text.  Not held across
 * the fork (pthread_atfork's usual advice): a fork from a signal handler
 * that interrupted set_message on the same thread would wait on itself. */
static void err_lock_renew(void)
{
  err_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

void hicp__error_watch_forks(void)
{
  (void)pthread_atfork(NULL, NULL, err_lock_renew);
}

static void set_message(hicp_context *ctx, const char *msg)
{
  const size_t n = strnlen(msg, sizeof ctx->err - 1);
  pthread_mutex_lock(&err_lock);
  memcpy(ctx->err, msg, n);
  ctx->err[n] = '\0';
  pthread_mutex_unlock(&err_lock);
}

/* The last message of a failure on this thread with no context: a call
 * made without one (hicp_model_build(NULL, ...)) that goes on past a
 * failure still knows why it failed (the model's fallback reason said
 * "Qhull failed" for every input: stop 53's review). */
static _Thread_local char orphan_err[HICP_ERRMSG_MAX];

int hicp__utf8_prec(const char *s, int max)
{
  const size_t len = strnlen(s, (size_t)max + 1);
  if (len <= (size_t)max)
    return (int)len;
  /* s[max], the first byte left out, continues a character: that
   * character (at most 4 bytes) is left out whole */
  int i = max;
  while (i > 0 && max - i < 3 && ((unsigned char)s[i] & 0xc0) == 0x80)
    i--;
  return ((unsigned char)s[i] & 0xc0) == 0x80 ? max : i;
}

int hicp__vfail(hicp_context *ctx, int code, const char *fmt, va_list ap)
{
  /* formatted with room for the character the cut may fall in, then cut
   * to what a context keeps on a whole character (hicp__utf8_prec) */
  char msg[HICP_ERRMSG_MAX + 4];
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[hicp__utf8_prec(msg, HICP_ERRMSG_MAX - 1)] = '\0';
  hicp__one_clean_line(msg);
  if (ctx != NULL)
    set_message(ctx, msg);
  else
    memcpy(orphan_err, msg, strlen(msg) + 1); /* at most HICP_ERRMSG_MAX */
  return code;
}

const char *hicp__fail_message(const hicp_context *ctx)
{
  return ctx != NULL ? ctx->err : orphan_err;
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
    const char *msg = ctx->err[0] ? ctx->err : hicp_strerror(code);
    snprintf(tmp, sizeof tmp, "%.*s: %.*s", hicp__utf8_prec(what, 150), what,
             hicp__utf8_prec(msg, 350), msg);
    hicp__one_clean_line(tmp);
    memcpy(ctx->err, tmp, sizeof tmp);
    pthread_mutex_unlock(&err_lock);
  }
  return code;
}

void hicp__clear_error(hicp_context *ctx)
{
  if (ctx != NULL)
    set_message(ctx, "");
  else
    orphan_err[0] = '\0';
}

const char *hicp_context_error(const hicp_context *ctx)
{
  return ctx != NULL ? ctx->err : "no context";
}
