// The RecordFunction observer: appends each operator's begin and end, with its arguments, to its thread's log
// (log_format.h), and the few events the Session writes itself. Nothing on the hot path decodes, formats, allocates
// per op or touches a file; names and schemas are interned once per operator.
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <vector>

#include "recording.h"

namespace reprise::capture::detail {

// This thread's log in the current window, made on its first event.
ThreadLog& thread_log();
// Adds the observer to LibTorch's global callbacks; it records while state().active is set.
at::CallbackHandle add_observer();

// Opens the ProfilerStep#N marker node `name` on this thread: the ops that follow are its children.
void open_step_marker(ThreadLog& L, uint32_t name);
// Closes the marker and whatever is still open above it.
void close_step_marker(ThreadLog& L);
// A node without a RecordFunction (a collective, the process groups) under the op open now; timed on the host
// timeline from `began_ns` (now_ns() when it began; -1: untimed) to now.
void write_leaf(ThreadLog& L, uint32_t name, int32_t collective, const std::vector<c10::IValue>& inputs,
                const std::vector<c10::IValue>& outputs, int64_t began_ns = -1);

}  // namespace reprise::capture::detail
