#ifndef BK_VERSION_H
#define BK_VERSION_H
#define BK_VERSION "0.1.0"
#endif
