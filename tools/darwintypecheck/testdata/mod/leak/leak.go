package leak

import "example.com/m/cgolib"

// Anything goes with a C type: the checker cannot say.
var N string = cgolib.Count()
