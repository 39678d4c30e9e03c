// File: config/option_table_undef.hpp
//
// Undefines the row macros of config/option_table.def after an expansion.
// No include guard: included after every expansion.
#undef MIBYAN_SECTION
#undef MIBYAN_SECTION_END
#undef MIBYAN_INT
#undef MIBYAN_BOOL
#undef MIBYAN_STRING
#undef MIBYAN_SECRET
#undef MIBYAN_CHOICE
#undef MIBYAN_CHECKED
#undef MIBYAN_LIST
#undef MIBYAN_FRACTION
#undef MIBYAN_MAPPING
#undef MIBYAN_CUSTOM
#undef MIBYAN_MEMBER
#undef MIBYAN_TOP
