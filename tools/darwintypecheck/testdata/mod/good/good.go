package good

import "example.com/m/cgolib"

var N = len(cgolib.Name())
