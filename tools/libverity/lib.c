//go:build cgo

// The library's C side: each thread's error message, and the call of a text callback (Go
// cannot call a C function pointer itself). Hidden: not part of the ABI.
//
// The messages live in memory of a pthread key, not in a _Thread_local buffer: a library that
// Python or any program dlopens gets only a little static TLS (glibc's surplus), which Go's
// runtime already uses.

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "verity.h"

#define HIDDEN __attribute__((visibility("hidden")))

enum { message_size = 4096 };

static pthread_key_t message_key;
static pthread_once_t message_once = PTHREAD_ONCE_INIT;

static void make_key(void) { pthread_key_create(&message_key, free); }

// message returns this thread's message buffer, allocating it on first use (NULL if there is
// no memory for it).
static char *message(void) {
	pthread_once(&message_once, make_key);
	char *buf = pthread_getspecific(message_key);
	if (buf == NULL && (buf = calloc(1, message_size)) != NULL && pthread_setspecific(message_key, buf) != 0) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

HIDDEN void verity__set_error(const char *msg, size_t len) {
	char *buf = message();
	if (buf == NULL) {
		return;
	}
	if (len > message_size - 1) {
		len = message_size - 1;
	}
	memcpy(buf, msg, len);
	buf[len] = 0;
}

HIDDEN const char *verity__error(void) {
	const char *buf = message();
	return buf != NULL ? buf : "(no memory for the message)";
}

HIDDEN int32_t verity__call_text(verity_text_fn fn, void *user, const char *text, size_t len) {
	return fn(user, text, len);
}
