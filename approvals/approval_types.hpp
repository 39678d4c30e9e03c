// File: approvals/approval_types.hpp
//
// The approval channel's plain types are public (the embedding API's
// runtime::set_approval_callback takes them): see mibyan/approval.hpp.
#pragma once

#include "mibyan/approval.hpp"
