# SPDX-License-Identifier: BSD-3-Clause
# Turns every src/redis/scripts/NAME.lua into a C string plus its SHA1 digest.
# Invoked at build time: cmake -DOUT=file.c -DDIR=src/redis/scripts -P embed_scripts.cmake
# A line "--#include FILE.lua" is replaced by src/redis/scripts/lib/FILE.lua (a
# prelude shared by several scripts); the digest is that of the joined body,
# the text EVAL sends, so it is what Redis computes too.
file(GLOB files "${DIR}/*.lua")
list(SORT files)
set(body "/* Generated from the Lua files in src/redis/scripts by cmake/embed_scripts.cmake. Do not edit. */\n#include \"scripts.h\"\n\n")
set(table "")
foreach(f ${files})
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} src)
  string(REGEX MATCHALL "--#include [A-Za-z0-9_]+\\.lua" incs "${src}")
  foreach(inc ${incs})
    string(REGEX REPLACE "^--#include " "" lib "${inc}")
    if(NOT EXISTS "${DIR}/lib/${lib}")
      message(FATAL_ERROR "${f}: ${inc}: no ${DIR}/lib/${lib}")
    endif()
    file(READ "${DIR}/lib/${lib}" libsrc)
    string(REGEX REPLACE "\n$" "" libsrc "${libsrc}")
    string(REPLACE "${inc}" "${libsrc}" src "${src}")
  endforeach()
  # Full-line comments stay in the source files, not in what is sent: a
  # connection's first command may be SCRIPT LOAD, and Redis 7 refuses a
  # bulk over 16 KB from a client that has not authenticated yet (it then
  # closes the connection, so a missing password showed as a reset, not
  # NOAUTH). It also spares Redis the parsing. Lines that only hold a
  # comment go (the "--" first, after blanks); code and trailing comments
  # stay. No script has a long string or comment ([[ ]]) for this to cut.
  string(PREPEND src "\n")
  string(REGEX REPLACE "\n[ \t]*--[^\n]*" "" src "${src}")
  string(REGEX REPLACE "\n[ \t]*\n" "\n" src "${src}")
  string(REGEX REPLACE "^\n" "" src "${src}")
  string(SHA1 sha "${src}")
  string(REPLACE "\\" "\\\\" esc "${src}")
  string(REPLACE "\"" "\\\"" esc "${esc}")
  string(REPLACE "\n" "\\n\"\n    \"" esc "${esc}")
  string(APPEND body "static const char lua_${name}[] =\n    \"${esc}\";\n\n")
  string(APPEND table "    {\"${name}\", lua_${name}, sizeof(lua_${name}) - 1, \"${sha}\"},\n")
endforeach()
string(APPEND body "const dlock__script dlock__scripts[] = {\n${table}    {0, 0, 0, {0}}\n};\n")
file(WRITE ${OUT}.tmp "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
