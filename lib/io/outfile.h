/* outfile.h: opening an output file so that a failed write never destroys
 * what was there.  A regular file is written to a temporary file in its own
 * directory (the same file system, so the rename is atomic) and renamed over
 * it only once it is complete; a symbolic link to one stays a link, the file
 * it names being the one replaced.  A FIFO or a device is written in place:
 * renaming over it would replace the node (as root, /dev/null) with a
 * regular file, and it holds nothing that a failure could destroy.
 *
 * On Linux the temporary file has no name while it is written (O_TMPFILE):
 * a process killed meanwhile leaves nothing behind.  It gets one only at the
 * commit, linked in beside the target under a temporary name that is at
 * once renamed over it.  Where the file system or the kernel cannot do that
 * (or /proc is missing), the temporary file is named from the start,
 * "TARGET.tmpPID.N", as it is elsewhere.
 *
 * A regular file that has no name (a nameless temporary reached through
 * /proc/self/fd/N, say) is written in place, truncated: there is no name to
 * rename over, and nothing anyone could see is destroyed.  This is how the
 * command-line tool has the library write into a temporary file of its own,
 * to be committed once the whole command has succeeded.
 *
 * A name for one of the process's own descriptors (/dev/stdout,
 * /dev/fd/N) is written in place through that descriptor: whatever the
 * process writes there itself (a report on standard output redirected to a
 * file) stays, and the output follows it.
 *
 * It knows nothing of hicp_context: the command-line tool compiles it in as
 * well, for the files it writes itself (the --truth transform). */
#ifndef HICP_IO_OUTFILE_H
#define HICP_IO_OUTFILE_H

#include <stdio.h>

typedef struct hicp__outfile {
  FILE *f;      /* where to write; NULL once closed */
  int f_fd;     /* the descriptor f writes to (fileno() does not know it) */
  char *tmp;    /* the named temporary file; NULL when there is none */
  char *target; /* what the temporary file replaces: the name, or what its link names;
                   NULL when writing in place */
  int nameless; /* the temporary file has no name yet: fd is its descriptor */
  int fd;       /* (nameless only) kept open until the commit or abort */
  int mode;     /* (nameless only) permissions to give it at the commit; -1: as they are */
  char fd_path[32]; /* (nameless only) "/proc/self/fd/N": a name that reopens it */
} hicp__outfile;

/* Each function returns NULL when it succeeded, else why not (a static or
 * strerror() string, to follow "cannot write PATH: ").  On failure
 * everything is cleaned up: no stream open, no temporary file left.  A
 * structure set to all zeros can be given to hicp__outfile_abort. */

/* The descriptor that `path` names, "/dev/stdout" (1), "/dev/stderr" (2),
 * "/dev/fd/N" or "/proc/self/fd/N" (N), else -1.  Such a name is the
 * process's own open file, and hicp__outfile_open writes it in place,
 * through a copy of the descriptor, at its offset: not replaced, not
 * truncated (but for a regular file without a name named as
 * /proc/self/fd/N, as above). */
int hicp__outfile_descriptor(const char *path);
/* Opens `path` for writing.  Refused: a directory, a socket, and a symbolic
 * link to a missing file (as GNU cp refuses to write through one: it may
 * name a place the link's owner did not mean). */
const char *hicp__outfile_open(hicp__outfile *o, const char *path);
/* A name under which what o writes can be opened again for writing (to
 * have someone else fill it): "/proc/self/fd/N" for a nameless temporary
 * file, the named temporary file, or `path` itself when it is written in
 * place.  Valid until the commit or abort. */
const char *hicp__outfile_name(const hicp__outfile *o, const char *path);
/* Flushes, syncs (a temporary file) and closes the stream.  A temporary
 * file is kept, complete, until hicp__outfile_commit or _abort. */
const char *hicp__outfile_close(hicp__outfile *o);
/* Everything but the rename: closes the stream (hicp__outfile_close) and
 * gives a nameless temporary file its name, so that a program writing
 * several files can see them all ready before it replaces any.  Such a
 * program closes them all first: a named temporary file is what a SIGKILL
 * would leave, so the names should come together, just before the renames.
 * What remains, a rename in the target's own directory, rarely fails: the
 * cases known to (another user's file in a sticky directory, a file
 * mounted over, as a container's bind mount is) are refused at the open. */
const char *hicp__outfile_ready(hicp__outfile *o);
/* Puts the temporary file in place of its target (nothing to do in place);
 * hicp__outfile_ready first, where it was not called. */
const char *hicp__outfile_commit(hicp__outfile *o);
/* Gives up in any state: closes the stream, removes the temporary file. */
void hicp__outfile_abort(hicp__outfile *o);
/* Whether a reason the calls above gave is a want of memory (the caller's
 * HICP_ENOMEM rather than HICP_EIO: stop 67's review). */
int hicp__outfile_no_memory(const char *why);

#endif /* HICP_IO_OUTFILE_H */
