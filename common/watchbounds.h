/* The bounds of FileWatch (docs/PROTOCOL.md, "FileWatch"), one place for both halves: the front
 * (server/files/watch.c) keeps each watch's events for its reader, the file worker
 * (sidecar/files/watcher.c) holds the watches' inotify instances and descriptors. */
#ifndef BK_WATCHBOUNDS_H
#define BK_WATCHBOUNDS_H

/* Watches of one sandbox at once (an inotify instance each in the file worker). */
#define BK_WATCHES_MAX 16
/* Directories watched (an inotify watch descriptor each), every watch of the sandbox together. */
#define BK_WATCH_DIRS_MAX 8192
/* What one watch keeps for its reader: events, and their paths' bytes. Past either, what comes
 * is counted in one OVERFLOW event instead. */
#define BK_WATCH_EVENTS_MAX 4096
#define BK_WATCH_BYTES_MAX (1u << 20)
/* Events in one answer: by default and at most; and their paths' bytes at most. */
#define BK_WATCH_READ_MAX 1000
#define BK_WATCH_READ_BYTES (256u << 10)

#endif
