/* SPDX-License-Identifier: GPL-2.0 */
/* vufsd: the log every part writes to (vufsd.c). */
#ifndef VUFSD_LOG_H
#define VUFSD_LOG_H

#include <stdbool.h>

#define PROG			"vufsd"

/* A line on stderr, prefixed with the program and a timestamp. */
void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* --verbose: log every vhost-user message and refused request. */
extern bool verbose;

#endif
