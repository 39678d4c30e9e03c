# mibyan_hex_bytes(PATH BYTES COUNT): reads the file PATH and sets BYTES to
# its bytes as a C initializer list ("0x2f,0x2a,...", 16 a line, each
# followed by a comma) and COUNT to their number. Shared by the embed_*
# scripts, which run with cmake -P at build time.
function(mibyan_hex_bytes path bytes_var count_var)
  file(READ "${path}" content HEX)
  string(LENGTH "${content}" hex_length)
  math(EXPR byte_count "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
  set(${bytes_var} "${bytes}" PARENT_SCOPE)
  set(${count_var} "${byte_count}" PARENT_SCOPE)
endfunction()
