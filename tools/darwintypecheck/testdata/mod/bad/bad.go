package bad

import "example.com/m/cgolib"

var N int = cgolib.Name() // a type error
