/*
 * xalloc.h: allocation that aborts on out-of-memory, and scope-bound cleanup helpers.
 *
 *	_cleanup_free_ char *s = xstrdup("x");   freed when s leaves scope
 *	_cleanup_close_ int fd = open(...);      closed when fd leaves scope (if >= 0)
 *	return steal_ptr(s);                     hand ownership out; the cleanup sees NULL
 */
#ifndef KIYOT_XALLOC_H
#define KIYOT_XALLOC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap);

/* Grows *arr (of *cap elements of size sz) so it holds at least `need` elements. */
void xgrow(void **arr, size_t *cap, size_t need, size_t sz);

static inline void freep(void *p)
{
	free(*(void **)p);
}
void closep(int *fd);
void fclosep(void *fp);

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

#define steal_ptr(p)                                                                               \
	({                                                                                         \
		__typeof__(p) _tmp = (p);                                                          \
		(p) = NULL;                                                                        \
		_tmp;                                                                              \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
