# Which Slurm the SPANK plugin and the agent are built against (docs/install.md, "A site's own
# Slurm"). A SPANK plugin must be built against the exact Slurm that loads it, so this is asked
# once and everything takes it from here:
#   SLURM_INCLUDE_DIR  the directory holding slurm/spank.h, slurm/slurm.h, slurm/slurm_version.h
#   SLURM_LIBRARY      libslurm.so (the agent links it; the plugin takes its symbols from slurmstepd)
#   SLURM_VERSION      the release those headers are, e.g. 24.11.5 (from slurm/slurm_version.h)
#
# -DSLURM_ROOT=<prefix>: a Slurm installed under a prefix, as a site that builds Slurm itself has
# it (PREFIX/include/slurm/*.h, PREFIX/lib, lib64 or lib/<multiarch>/libslurm.so). Only that
# prefix is searched, never the system's directories, and its include directory is put first on
# every compile line (as a system directory, so Slurm's headers are not held to our warnings), so
# a distribution's /usr/include/slurm on the same machine cannot be picked instead. The installed
# agent finds that libslurm.so through an RPATH. Empty (the default): the system's Slurm.
# SLURM_ROOT rather than CMAKE_PREFIX_PATH: a prefix path is searched before, not instead of, the
# system's, so a missing or misspelt prefix would silently build against the distribution's Slurm.
set(SLURM_ROOT "" CACHE PATH "A Slurm installed under this prefix (empty: the system's Slurm)")

# A different SLURM_ROOT than the one these were found under: find them again.
if(NOT "${SLURM_ROOT}" STREQUAL "${SLURM_ROOT_FOUND_UNDER}")
  unset(SLURM_INCLUDE_DIR CACHE)
  unset(SLURM_LIBRARY CACHE)
endif()
if(SLURM_ROOT)
  if(NOT IS_DIRECTORY "${SLURM_ROOT}")
    message(FATAL_ERROR "SLURM_ROOT=${SLURM_ROOT}: no such directory")
  endif()
  find_path(SLURM_INCLUDE_DIR slurm/spank.h PATHS "${SLURM_ROOT}/include" NO_DEFAULT_PATH)
  find_library(SLURM_LIBRARY slurm PATHS "${SLURM_ROOT}"
               PATH_SUFFIXES lib64 lib lib/${CMAKE_LIBRARY_ARCHITECTURE} NO_DEFAULT_PATH)
  set(where "under SLURM_ROOT=${SLURM_ROOT}")
else()
  find_path(SLURM_INCLUDE_DIR slurm/spank.h)
  find_library(SLURM_LIBRARY slurm)
  set(where "(Debian: apt install libslurm-dev; a Slurm under a prefix: -DSLURM_ROOT=<prefix>)")
endif()
if(NOT SLURM_INCLUDE_DIR)
  message(FATAL_ERROR "slurm/spank.h not found ${where}")
endif()
foreach(header slurm/slurm.h slurm/slurm_version.h)
  if(NOT EXISTS "${SLURM_INCLUDE_DIR}/${header}")
    message(FATAL_ERROR "${SLURM_INCLUDE_DIR}/${header} is missing (slurm/spank.h is there)")
  endif()
endforeach()
if(NOT SLURM_LIBRARY)
  message(FATAL_ERROR "libslurm.so not found ${where}")
endif()
set(SLURM_ROOT_FOUND_UNDER "${SLURM_ROOT}" CACHE INTERNAL "SLURM_ROOT the Slurm paths were found under")

# slurm_version.h holds only the number (0x180b05 is 24.11.5): SLURM_VERSION_NUM(a,b,c) packs
# each part into a byte.
file(STRINGS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h" version_line
     REGEX "^#define SLURM_VERSION_NUMBER 0x[0-9a-fA-F]+")
if(NOT version_line MATCHES "(0x[0-9a-fA-F]+)")
  message(FATAL_ERROR "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h: no SLURM_VERSION_NUMBER")
endif()
set(version_number "${CMAKE_MATCH_1}")
math(EXPR major "(${version_number} >> 16) & 255")
math(EXPR minor "(${version_number} >> 8) & 255")
math(EXPR micro "${version_number} & 255")
set(SLURM_VERSION "${major}.${minor}.${micro}")
if(minor LESS 10)
  set(SLURM_VERSION "${major}.0${minor}.${micro}")  # Slurm spells its releases 22.05, 23.02
endif()
message(STATUS "Slurm ${SLURM_VERSION}: headers in ${SLURM_INCLUDE_DIR}, library ${SLURM_LIBRARY}")

if(SLURM_ROOT)
  # Before every other include directory, for every target below (the plugin's, the agent's and
  # the tests' own mentions of SLURM_INCLUDE_DIR then name the same directory, and a directory
  # given both ways is searched as a system one, here).
  include_directories(BEFORE SYSTEM "${SLURM_INCLUDE_DIR}")
  # The agent installed from this build finds the prefix's libslurm.so without ld.so.conf.
  set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
endif()
