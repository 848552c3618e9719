# HICP_CHECK_CUDA
# ---------------
# Tri-state --with-cuda[=DIR]: "auto" (default) builds the CUDA backend when a
# working toolkit is found and quietly leaves it out otherwise; "yes" or a DIR
# makes a missing or broken toolkit a hard error; "no" builds CPU-only.
#
# The CUDA runtime (libcudart) is linked as a shared library: libtool will
# not put a static archive into a shared library.  The runtime loads the
# driver (libcuda) with dlopen, so libhicp builds and loads on machines without
# a GPU or driver, where the probe reports "no CUDA device".  The toolkit's
# library directory is added to the run path (--disable-cuda-rpath to leave
# it to the system's loader configuration, as distributions prefer).
#
# Sets: HAVE_CUDA (conditional and define), NVCC, NVCC_GENCODE, CUDA_CFLAGS,
# CUDA_LIBS, CUDA_RPATH, hicp_cuda_summary.
AC_DEFUN([HICP_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [build the CUDA backend; DIR is the toolkit root (default: auto, use it when found)])],
  [], [with_cuda=auto])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST],
    [compute capabilities to build SASS for, e.g. "80 90" (default) or 80,90; PTX is added for the last one listed; naming them asks for the CUDA backend])],
  [hicp_cuda_arch_given=yes], [with_cuda_arch="80 90"; hicp_cuda_arch_given=no])
AC_ARG_ENABLE([cuda-rpath],
  [AS_HELP_STRING([--disable-cuda-rpath], [do not add the CUDA library directory to the run path])],
  [], [enable_cuda_rpath=yes])
AC_ARG_VAR([NVCC], [CUDA compiler driver (nvcc)])
AC_ARG_VAR([NVCCFLAGS], [extra flags for nvcc])

have_cuda=no
hicp_cuda_summary="no"
AS_CASE([$with_cuda],
  [no], [],
  [yes|auto], [hicp_cuda_dirs="/usr/local/cuda /usr/lib/cuda /opt/cuda"],
  [hicp_cuda_dirs="$with_cuda"])

AS_IF([test "x$with_cuda" != xno], [
  hicp_cuda_root=
  AS_IF([test -z "$NVCC"], [
    for d in $hicp_cuda_dirs; do
      AS_IF([test -x "$d/bin/nvcc"], [NVCC="$d/bin/nvcc"; hicp_cuda_root="$d"; break])
    done
  ])
  AS_IF([test -z "$NVCC"],
        [AS_CASE([$with_cuda], [yes|auto], [AC_PATH_PROG([NVCC], [nvcc])])])
  AS_IF([test -n "$NVCC" && test -z "$hicp_cuda_root"],
        [hicp_cuda_root=`AS_DIRNAME(["$NVCC"])`; hicp_cuda_root=`AS_DIRNAME(["$hicp_cuda_root"])`])
  AC_MSG_CHECKING([for the CUDA toolkit])
  hicp_cuda_ok=yes
  AS_IF([test -z "$NVCC" || test ! -x "$NVCC"], [hicp_cuda_ok="no (nvcc not found)"])
  AS_IF([test "x$hicp_cuda_ok" = xyes && test ! -r "$hicp_cuda_root/include/cuda_runtime.h"],
        [hicp_cuda_ok="no (cuda_runtime.h not found under $hicp_cuda_root/include)"])
  hicp_cuda_libdir=
  for l in lib64 lib lib/x86_64-linux-gnu; do
    AS_IF([test -r "$hicp_cuda_root/$l/libcudart.so"], [hicp_cuda_libdir="$hicp_cuda_root/$l"; break])
  done
  AS_IF([test "x$hicp_cuda_ok" = xyes && test -z "$hicp_cuda_libdir"],
        [hicp_cuda_ok="no (libcudart.so not found under $hicp_cuda_root)"])
  AS_IF([test "x$hicp_cuda_ok" = xyes], [
    # nvcc must compile and link a kernel with the chosen host compiler.
    NVCC_GENCODE=
    hicp_last_arch=
    # a comma list too; each a compute capability such as 90 or 90a
    with_cuda_arch=`echo "$with_cuda_arch" | tr ',' ' '`
    for a in $with_cuda_arch; do
      AS_CASE([$a], [[[1-9]][[0-9]]|[[1-9]][[0-9]][[0-9]]|[[1-9]][[0-9]][[a-z]]|[[1-9]][[0-9]][[0-9]][[a-z]]], [],
        [AC_MSG_ERROR([--with-cuda-arch: '$a' is not a compute capability (such as 80, 90 or 90a)])])
      NVCC_GENCODE="$NVCC_GENCODE -gencode=arch=compute_$a,code=sm_$a"
      hicp_last_arch=$a
    done
    AS_IF([test -z "$hicp_last_arch"], [AC_MSG_ERROR([--with-cuda-arch needs at least one compute capability])])
    NVCC_GENCODE="$NVCC_GENCODE -gencode=arch=compute_$hicp_last_arch,code=compute_$hicp_last_arch"
    cat > conftest.cu <<_HICPEOF
__global__ void k(float *x) { x[[threadIdx.x]] += 1.0f; }
int main(void) { k<<<1, 1>>>(0); return 0; }
_HICPEOF
    AS_IF([$NVCC -ccbin "$CXX" $NVCC_GENCODE -o conftest$EXEEXT conftest.cu >&AS_MESSAGE_LOG_FD 2>&1],
          [], [hicp_cuda_ok="no (nvcc cannot build a test kernel; see config.log)"])
    rm -f conftest.cu conftest$EXEEXT
  ])
  AC_MSG_RESULT([$hicp_cuda_ok])
  # Naming architectures asks for the backend as --with-cuda does: a test
  # kernel their list broke ("80,90" was once taken whole) built a
  # CPU-only library, and configure succeeded (stop 64's review).
  AS_IF([test "x$hicp_cuda_ok" = xyes], [have_cuda=yes],
        [AS_IF([test "x$with_cuda" != xauto],
               [AC_MSG_ERROR([CUDA was requested (--with-cuda=$with_cuda) but: $hicp_cuda_ok])],
               [test "x$hicp_cuda_arch_given" = xyes],
               [AC_MSG_ERROR([CUDA was requested (--with-cuda-arch=$with_cuda_arch) but: $hicp_cuda_ok])],
               [hicp_cuda_summary=$hicp_cuda_ok
                AC_DEFINE([HICP_CUDA_NOT_FOUND], [1],
                  [Define to 1 when --with-cuda=auto found no usable CUDA toolkit.])])])
])

AS_IF([test "x$have_cuda" = xyes], [
  CUDA_CFLAGS="-I$hicp_cuda_root/include"
  CUDA_LIBS="-L$hicp_cuda_libdir -lcudart -lstdc++"
  # libtool's -R, on libhicp.so and the programs: a -Wl,-rpath in
  # CUDA_LIBS reached neither (libtool drops it from the convenience
  # library) and went into hicp.pc's Libs.private instead
  AS_IF([test "x$enable_cuda_rpath" = xyes], [CUDA_RPATH="-R$hicp_cuda_libdir"])
  AC_DEFINE([HICP_HAVE_CUDA], [1], [Define to 1 when the CUDA backend is built.])
  hicp_cuda_summary="yes ($NVCC, archs: $with_cuda_arch + PTX)"
])
AC_SUBST([NVCC_GENCODE])
AC_SUBST([CUDA_CFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([CUDA_RPATH])
AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
])

# HICP_ENABLE_SANITIZERS
# ----------------------
# --enable-sanitizers[=LIST]: build everything with -fsanitize=LIST
# (default address,undefined), no recovery, frame pointers kept.
AC_DEFUN([HICP_ENABLE_SANITIZERS], [
AC_ARG_ENABLE([sanitizers],
  [AS_HELP_STRING([--enable-sanitizers@<:@=LIST@:>@],
    [build with -fsanitize=LIST (default: address,undefined)])],
  [], [enable_sanitizers=no])
AS_CASE([$enable_sanitizers],
  [no], [],
  [yes], [enable_sanitizers="address,undefined"])
SANITIZER_FLAGS=
AS_IF([test "x$enable_sanitizers" != xno], [
  SANITIZER_FLAGS="-fsanitize=$enable_sanitizers -fno-sanitize-recover=all -fno-omit-frame-pointer"
  hicp_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS $SANITIZER_FLAGS"
  hicp_save_LDFLAGS=$LDFLAGS
  LDFLAGS="$LDFLAGS $SANITIZER_FLAGS"
  AC_MSG_CHECKING([whether $CC supports $SANITIZER_FLAGS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([the compiler cannot build with -fsanitize=$enable_sanitizers])])
  CFLAGS=$hicp_save_CFLAGS
  LDFLAGS=$hicp_save_LDFLAGS
])
AC_SUBST([SANITIZER_FLAGS])
])
