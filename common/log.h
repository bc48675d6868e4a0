/*
 * Logging shared by every sepcsi process: one line per event on stderr, either
 * "text" (key=value) or "json" (one object per line). Safe to call from any
 * thread; each line is written with a single write(2) so lines never interleave.
 */
#ifndef SEPCSI_LOG_H
#define SEPCSI_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };
enum log_format { LOG_FMT_TEXT = 0, LOG_FMT_JSON };

/* The most key/value pairs one line or record carries; later ones are not written. */
#define LOG_FIELDS_MAX ((size_t)16)

/* proc names the process in every line ("rpcd", "mounthelper", ...). */
void log_init(const char *proc, enum log_format fmt, enum log_level lvl);

/* Parse "text"/"json" and "error"/"warn"/"info"/"debug"; 0 on success, -1 otherwise. */
int log_parse_format(const char *s, enum log_format *out);
int log_parse_level(const char *s, enum log_level *out);

/*
 * Structured event: the remaining arguments are key, value string pairs ended by
 * a NULL key. A NULL value is skipped. Example:
 *   log_kv(LOG_LVL_INFO, "csi_call", "method", m, "code", "OK", NULL);
 */
void log_kv(enum log_level lvl, const char *event, ...) __attribute__((sentinel));

/*
 * One JSON object {"ts":...,"event":...,<key>:<value>,...} on fd in a single
 * write(2), whatever the log format: kv holds n strings, key and value
 * alternating; a NULL value is skipped. Each value is cut at 1 KiB ("..."), so
 * a record is always whole (an audit record: the helper's audit.log).
 */
void log_record(int fd, const char *event, const char *const *kv, size_t n);

/* Free-form message, printf style; logged as event "msg" with key "msg". */
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

/* Log at LOG_LVL_ERROR and exit(1): for broken invariants in process glue only. */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
