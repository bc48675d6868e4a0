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

/*
 * Every value is cut at LOG_VALUE_MAX bytes as written (escapes included) and
 * then ends in "..."; a line has room for LOG_FIELDS_MAX such fields, so a line
 * (and an audit record) is always whole: one complete JSON object, or text
 * with every key, whatever a hostile string holds.
 */
#define LOG_VALUE_MAX 1022 /* 1 KiB with a JSON string's quotes */
#define LOG_LINE_MAX  (128 + LOG_FIELDS_MAX * (64 + LOG_VALUE_MAX + 8))

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

/* c as written in a value: quotes, backslashes and control bytes never pass raw. */
static size_t escape(unsigned char c, char tmp[8])
{
	if (c == '"' || c == '\\') {
		tmp[0] = '\\';
		tmp[1] = (char)c;
		return 2;
	}
	if (c < 0x20 || c == 0x7f)
		return (size_t)snprintf(tmp, 8, "\\u%04x", c);
	tmp[0] = (char)c;
	return 1;
}

/* s escaped, whole if that takes at most LOG_VALUE_MAX bytes, else cut and ending in "...". */
static void put_escaped(struct line *l, const char *s)
{
	char tmp[8];
	size_t total = 0, used = 0;
	for (const char *p = s; *p && total <= LOG_VALUE_MAX; p++)
		total += escape((unsigned char)*p, tmp);
	size_t limit = total <= LOG_VALUE_MAX ? LOG_VALUE_MAX : LOG_VALUE_MAX - 3;
	for (; *s; s++) {
		size_t n = escape((unsigned char)*s, tmp);
		if (used + n > limit)
			break;
		put_raw(l, tmp, n);
		used += n;
	}
	if (*s)
		put_str(l, "...");
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

static void put_field(struct line *l, enum log_format fmt, const char *key, const char *val,
                      bool first)
{
	if (fmt == LOG_FMT_JSON) {
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

/* Time stamp and event; level and process too unless level is NULL (an audit record). */
static void put_head(struct line *l, enum log_format fmt, const char *level, const char *event)
{
	char ts[40];
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);

	if (fmt == LOG_FMT_JSON) {
		put_str(l, "{");
		put_field(l, fmt, "ts", ts, true);
		if (level) {
			put_field(l, fmt, "level", level, false);
			put_field(l, fmt, "proc", log_proc, false);
		}
		put_field(l, fmt, "event", event, false);
	} else {
		put_str(l, ts);
		put_str(l, " ");
		put_str(l, level);
		put_str(l, " ");
		put_str(l, log_proc);
		put_str(l, ": ");
		put_str(l, event);
	}
}

/* The line's end, then one write(2): lines of concurrent writers never interleave. */
static void put_tail_and_write(struct line *l, enum log_format fmt, int fd)
{
	if (fmt == LOG_FMT_JSON)
		put_str(l, "}");
	l->buf[l->len++] = '\n';

	int saved = errno;
	ssize_t w = write(fd, l->buf, l->len);
	(void)w;
	errno = saved;
}

static void emit(enum log_level lvl, const char *event, va_list ap)
{
	struct line l = {.len = 0};
	put_head(&l, log_fmt, level_names[lvl], event);
	for (size_t i = 0; i < LOG_FIELDS_MAX; i++) {
		const char *key = va_arg(ap, const char *);
		if (!key)
			break;
		const char *val = va_arg(ap, const char *);
		if (val)
			put_field(&l, log_fmt, key, val, false);
	}
	put_tail_and_write(&l, log_fmt, STDERR_FILENO);
}

void log_record(int fd, const char *event, const char *const *kv, size_t n)
{
	struct line l = {.len = 0};
	put_head(&l, LOG_FMT_JSON, NULL, event);
	for (size_t i = 0; i + 1 < n && i < 2 * LOG_FIELDS_MAX; i += 2)
		if (kv[i + 1])
			put_field(&l, LOG_FMT_JSON, kv[i], kv[i + 1], false);
	put_tail_and_write(&l, LOG_FMT_JSON, fd);
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
	char msg[LOG_VALUE_MAX + 1]; /* cut again, with "...", when written */
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
