"""The scans the scan tests share: torch's cumulative ops and a linear recurrence (whole, and h
alone), as C++ functors."""
from __future__ import annotations

from jiter_magic import create_multi_output_scan_fn, create_scan_fn

ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MUL = "template <typename T> T mul(T a, T b) { return a * b; }\n"
# log(exp(a) + exp(b)), stable: the larger plus log1p of the smaller's ratio; equal infinities stay.
LSE = ("template <typename T> T lse(T a, T b) {\n"
       "  if (b > a) { const T t = a; a = b; b = t; }\n"
       "  const T d = b - a;\n"
       "  if (d != d) return (a == a && b == b) ? a : d;\n"
       "  return a + log1p(exp(d));\n}\n")
# As torch.cummax: NaN wins and stays, a later element wins a tie (so does a later NaN).
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool an = a != a, bn = b != b;\n"
            "  const bool take_b = bn ? (!an || ib > ia) : (!an && (b > a || (b == a && ib > ia)));\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")
KEEP_MIN = KEEP_MAX.replace("keep_max", "keep_min").replace("b > a", "b < a")
AFFINE = ("template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b) {\n"
          "  a = a1 * a2; b = a2 * b1 + b2;\n}\n")
# An exponential moving average as a linear recurrence of one input: h = decay * h + (1 - decay) * x.
EMA = ("template <typename T> void ema(T x, T decay, T& a, T& b) { a = decay; b = (1 - decay) * x; }\n" + AFFINE)

cumsum = create_scan_fn(ADD, 0, combine="add")
cumprod = create_scan_fn(MUL, 1, combine="mul")
logcumsumexp = create_scan_fn(LSE, float("-inf"), combine="lse")
cummax = create_multi_output_scan_fn(KEEP_MAX, float("-inf"), combine="keep_max")
cummin = create_multi_output_scan_fn(KEEP_MIN, float("inf"), combine="keep_min")
linear = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine")
linear_h = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=(1,))  # h alone
ema = create_multi_output_scan_fn(EMA, (1, 0), map="ema", combine="affine", decay=0.9)
