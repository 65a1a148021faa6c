// Metadata-only ops: a view, a transpose, an allocation without a fill. They cost host time and move no bytes.
#include "family.h"

namespace reprise::predict::detail {
namespace {

bool view_work(const Trace& t, const Node& n, OpWork& w) {
  each_arg_tensor(t, n, false, [&](uint32_t k) {
    if (w.dtype.empty()) w.dtype = dtype_of(t, t.tensors[k]);
  });
  return true;
}

}  // namespace

const Family kView{OpFamily::View,
                   {"view",
                    "_unsafe_view",
                    "_reshape_alias",
                    "as_strided",
                    "t",
                    "transpose",
                    "permute",
                    "expand",
                    "expand_as",
                    "squeeze",
                    "unsqueeze",
                    "slice",
                    "select",
                    "narrow",
                    "detach",
                    "alias",
                    "split",
                    "split_with_sizes",
                    "unsafe_split",
                    "chunk",
                    "unbind",
                    "unflatten",
                    "view_as",
                    "empty",
                    "empty_like",
                    "empty_strided",
                    "new_empty",
                    "new_empty_strided",
                    "lift_fresh",
                    "resolve_conj",
                    "resolve_neg",
                    "numpy_T",
                    "size",
                    "stride",
                    "record_stream",
                    "as_strided_",
                    "squeeze_",
                    "unsqueeze_",
                    "t_",
                    "transpose_",
                    "detach_",
                    "diagonal",
                    "unfold",
                    "movedim",
                    "swapaxes",
                    "view_as_real",
                    "view_as_complex",
                    "_conj",
                    "conj",
                    "real",
                    "imag",
                    "set_",
                    "is_same_size",
                    "_has_compatible_shallow_copy_type",
                    "result_type",
                    "broadcast_tensors"},
                   view_work};

}  // namespace reprise::predict::detail
