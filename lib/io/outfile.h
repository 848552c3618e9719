/* outfile.h: opening an output file so that a failed write never destroys
 * what was there.  A regular file is written under a temporary name in its
 * own directory (the same file system, so the rename is atomic) and renamed
 * over it only once it is complete; a symbolic link to one stays a link, the
 * file it names being the one replaced.  A FIFO or a device is written in
 * place: renaming over it would replace the node (as root, /dev/null) with a
 * regular file, and it holds nothing that a failure could destroy.
 *
 * It knows nothing of hicp_context: the command-line tool compiles it in as
 * well, for the files it writes itself (the --truth transform). */
#ifndef HICP_IO_OUTFILE_H
#define HICP_IO_OUTFILE_H

#include <stdio.h>

typedef struct hicp__outfile {
  FILE *f;      /* where to write; NULL once closed */
  char *tmp;    /* the temporary file; NULL when writing in place */
  char *target; /* what the temporary file replaces: the name, or what its link names */
} hicp__outfile;

/* Each function returns NULL when it succeeded, else why not (a static or
 * strerror() string, to follow "cannot write PATH: ").  On failure
 * everything is cleaned up: no stream open, no temporary file left. */

/* Opens `path` for writing.  Refused: a directory, a socket, and a symbolic
 * link to a missing file (as GNU cp refuses to write through one: it may
 * name a place the link's owner did not mean). */
const char *hicp__outfile_open(hicp__outfile *o, const char *path);
/* Flushes, syncs (a temporary file) and closes the stream.  A temporary
 * file is kept, complete, until hicp__outfile_commit or _abort. */
const char *hicp__outfile_close(hicp__outfile *o);
/* Renames the temporary file over its target (nothing to do in place). */
const char *hicp__outfile_commit(hicp__outfile *o);
/* Gives up in any state: closes the stream, removes the temporary file. */
void hicp__outfile_abort(hicp__outfile *o);

#endif /* HICP_IO_OUTFILE_H */
