/*
 * Line-oriented logging for all sepcsi processes (see log.h). Runs in every
 * process, with whatever privilege that process has; nothing here is fatal
 * except log_fatal(). Values are escaped so a hostile string (a volume name
 * from the network) cannot forge a second log line or break the JSON.
 */
#include "log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096

static const char *log_proc = "sepcsi";
static enum log_format log_fmt = LOG_FMT_TEXT;
static enum log_level log_lvl = LOG_LVL_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_init(const char *proc, enum log_format fmt, enum log_level lvl)
{
	log_proc = proc;
	log_fmt = fmt;
	log_lvl = lvl;
}

int log_parse_format(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0)
		*out = LOG_FMT_TEXT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_FMT_JSON;
	else
		return -1;
	return 0;
}

int log_parse_level(const char *s, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

struct line {
	char buf[LOG_LINE_MAX];
	size_t len;
};

static void put_raw(struct line *l, const char *s, size_t n)
{
	if (n > sizeof(l->buf) - 2 - l->len)
		n = sizeof(l->buf) - 2 - l->len; /* keep room for '\n' and NUL */
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

static void put_str(struct line *l, const char *s)
{
	put_raw(l, s, strlen(s));
}

/* Escape for both formats: quotes, backslashes and control bytes never pass raw. */
static void put_escaped(struct line *l, const char *s)
{
	char tmp[8];
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)c;
			put_raw(l, tmp, 2);
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(tmp, sizeof(tmp), "\\u%04x", c);
			put_str(l, tmp);
		} else {
			put_raw(l, (const char *)&c, 1);
		}
	}
}

static bool needs_quotes(const char *s)
{
	if (*s == '\0')
		return true;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= ' ' || c == '"' || c == '\\' || c == '=' || c == 0x7f)
			return true;
	}
	return false;
}

static void put_field(struct line *l, const char *key, const char *val, bool first)
{
	if (log_fmt == LOG_FMT_JSON) {
		put_str(l, first ? "\"" : ",\"");
		put_escaped(l, key);
		put_str(l, "\":\"");
		put_escaped(l, val);
		put_str(l, "\"");
	} else {
		put_str(l, " ");
		put_str(l, key);
		put_str(l, "=");
		if (needs_quotes(val)) {
			put_str(l, "\"");
			put_escaped(l, val);
			put_str(l, "\"");
		} else {
			put_str(l, val);
		}
	}
}

static void emit(enum log_level lvl, const char *event, va_list ap)
{
	struct line l = {.len = 0};
	char ts[40];
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);

	if (log_fmt == LOG_FMT_JSON) {
		put_str(&l, "{");
		put_field(&l, "ts", ts, true);
		put_field(&l, "level", level_names[lvl], false);
		put_field(&l, "proc", log_proc, false);
		put_field(&l, "event", event, false);
	} else {
		put_str(&l, ts);
		put_str(&l, " ");
		put_str(&l, level_names[lvl]);
		put_str(&l, " ");
		put_str(&l, log_proc);
		put_str(&l, ": ");
		put_str(&l, event);
	}
	for (;;) {
		const char *key = va_arg(ap, const char *);
		if (!key)
			break;
		const char *val = va_arg(ap, const char *);
		if (val)
			put_field(&l, key, val, false);
	}
	if (log_fmt == LOG_FMT_JSON)
		put_str(&l, "}");
	l.buf[l.len++] = '\n';

	int saved = errno;
	ssize_t w = write(STDERR_FILENO, l.buf, l.len);
	(void)w;
	errno = saved;
}

void log_kv(enum log_level lvl, const char *event, ...)
{
	va_list ap;
	if (lvl > log_lvl)
		return;
	va_start(ap, event);
	emit(lvl, event, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 0))) static void log_vmsg(enum log_level lvl, const char *fmt,
                                                           va_list ap)
{
	char msg[LOG_LINE_MAX / 2];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	log_kv(lvl, "msg", "msg", msg, NULL);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;
	if (lvl > log_lvl)
		return;
	va_start(ap, fmt);
	log_vmsg(lvl, fmt, ap);
	va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(LOG_LVL_ERROR, fmt, ap);
	va_end(ap);
	exit(1);
}
