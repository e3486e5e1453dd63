# cmake -DINPUT=track_record.json -DOUTPUT=track_record_text.cpp -P embed_track_record.cmake
# Writes the JSON into a C++ raw string literal (TRACK_RECORD_JSON, track_record_text.hpp),
# in pieces of at most 16,000 characters, which compilers concatenate.
file(READ ${INPUT} text)
string(LENGTH "${text}" length)
set(body "")
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${text}" ${offset} 16000 piece)
  string(APPEND body "R\"loomjson(${piece})loomjson\"\n")
  math(EXPR offset "${offset} + 16000")
endwhile()
if(body STREQUAL "")
  set(body "\"\"")
endif()
file(WRITE ${OUTPUT}
  "// Generated from strategies/bands/track_record.json by embed_track_record.cmake.\n"
  "#include \"strategies/bands/track_record_text.hpp\"\n\n"
  "namespace loom::strategies {\n\n"
  "const char* const TRACK_RECORD_JSON =\n${body};\n\n"
  "}  // namespace loom::strategies\n")
