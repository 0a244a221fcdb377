/*
 * strvec.h: a growable, NULL-terminated vector of strings it owns: the shape of an argv, of an
 * image's Entrypoint, Cmd and Env, and of protobuf-c's repeated strings. Git's strvec is the
 * model.
 *
 *	struct strvec sv = STRVEC_INIT;
 *	strvec_push(&sv, "crun");
 *	strvec_pushf(&sv, "--log=%s", path);
 *	strvec_pushv(&sv, image->cmd);
 *	execv(sv.v[0], sv.v);
 *	strvec_clear(&sv);
 *
 * sv.v is never NULL and always ends with a NULL; sv.nr counts the strings before it. Every
 * string is the vector's own copy. Out of memory aborts (xalloc.h). A vector handed out with
 * strvec_detach is a plain NULL-terminated char ** whose strings and array the receiver frees
 * with strv_free; the strv_ functions read and free such vectors, and take NULL for an empty one.
 * Not thread safe: a vector belongs to one thread at a time.
 */
#ifndef KIYOT_STRVEC_H
#define KIYOT_STRVEC_H

#include <stdbool.h>
#include <stddef.h>

struct strvec {
	char **v;
	size_t nr;
	size_t alloc; /* slots of v, the NULL's included; 0 while v is the shared empty vector */
};

/* What an empty vector points at; never written. */
extern char *strvec_empty[];

#define STRVEC_INIT                                                                                \
	{                                                                                          \
		strvec_empty, 0, 0                                                                 \
	}

void strvec_init(struct strvec *sv);
/* Appends a copy of s; returns the copy. */
const char *strvec_push(struct strvec *sv, const char *s);
/* Appends the formatted string; returns it. */
const char *strvec_pushf(struct strvec *sv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends copies of a NULL-terminated vector's strings (NULL: none). */
void strvec_pushv(struct strvec *sv, char *const *v);
/* Appends copies of the n strings of l (protobuf-c's repeated strings and their count). */
void strvec_pushn(struct strvec *sv, char *const *l, size_t n);
/* Removes and frees the last string, if any. */
void strvec_pop(struct strvec *sv);
/* Frees every string and the array; sv is empty again. */
void strvec_clear(struct strvec *sv);
/* Hands the NULL-terminated array (never NULL) to the caller, who frees it with strv_free; sv
 * is empty again. */
char **strvec_detach(struct strvec *sv);
/* Makes sv own v, a NULL-terminated vector of strings allocated as strv_free frees them (NULL:
 * empty), so that it can grow; what sv held before is cleared. */
void strvec_attach(struct strvec *sv, char **v);

/* The number of strings of a NULL-terminated vector; 0 for NULL. */
size_t strv_len(char *const *v);
/* Frees the strings and the array of a NULL-terminated vector; NULL is nothing. */
void strv_free(char **v);
/* A deep copy, never NULL (NULL gives an empty vector). */
char **strv_dup(char *const *v);
/* Whether s is one of the strings. */
bool strv_has(char *const *v, const char *s);

#endif
