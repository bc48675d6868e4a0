/*
 * Test pause points: hold a worker at a named step of an operation so that a
 * test can look at, or kill, a driver whose operation is half done. Only in a
 * test build (-DSEPCSI_TESTS=ON, as tools/test.sh builds); a shipped
 * build has none, each point compiling to nothing. See mh_pause.c.
 */
#ifndef SEPCSI_MH_PAUSE_H
#define SEPCSI_MH_PAUSE_H

#include <stdbool.h>

#include "mh.h"

#ifdef SEPCSI_TEST_PAUSE
/*
 * Read SEPCSI_TEST_PAUSE once, at start-up, before confinement, as root;
 * when it is on, open <data-dir>/test-pause (made 0711 if missing), beside
 * the images directory images_fd, so that gates are looked up there even
 * once the process is no longer root.
 */
void mh_pause_init(int images_fd);

/*
 * If enabled and <data-dir>/test-pause/<point> or .../<point>@<key> exists
 * (key: the volume or snapshot id acted on, NULL for none): log, and wait
 * while it does.
 */
void mh_pause(const struct mh_ctx *c, const char *point, const char *key);

/* Would mh_pause(c, point, key) wait now? (false whenever pauses are off) */
bool mh_pause_held(const struct mh_ctx *c, const char *point, const char *key);
#else
#define mh_pause_init(images_fd)     ((void)(images_fd))
#define mh_pause(c, point, key)      ((void)(c), (void)(key))
#define mh_pause_held(c, point, key) ((void)(c), (void)(key), false)
#endif

#endif
