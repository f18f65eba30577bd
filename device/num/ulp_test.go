package num

import (
	"fmt"
	"math"
)

// ulpErr returns |y - ref| in units of the float32 spacing at ref (2^-149 below the normal
// range; 2^104 beyond MaxFloat32). An infinite y is exact if ref rounds to it and infinitely
// wrong otherwise; a NaN y is never right unless ref is NaN.
func ulpErr(y float32, ref float64) float64 {
	yf := float64(y)
	switch {
	case math.IsNaN(ref) || math.IsNaN(yf):
		if math.IsNaN(ref) && math.IsNaN(yf) {
			return 0
		}
		return math.Inf(1)
	case math.IsInf(yf, 0):
		if float32(ref) == y {
			return 0
		}
		return math.Inf(1)
	}
	_, e := math.Frexp(ref) // |ref| in [2^(e-1), 2^e)
	if ref == 0 || e-24 < -149 {
		e = -149 + 24
	}
	return math.Abs(yf-ref) / math.Ldexp(1, e-24)
}

// bitsOf formats a float32 as hex bits and %g, for failure messages.
func bitsOf(f float32) string { return fmt.Sprintf("%#08x (%g)", math.Float32bits(f), f) }
