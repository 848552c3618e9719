/* version.c: the version of the library in use (as opposed to the headers). */
#include "config.h"

#include "hicp.h"

const char *hicp_version(void)
{
  return HICP_VERSION_STRING;
}

int hicp_version_number(void)
{
  return HICP_VERSION_NUMBER;
}
