//go:build vz

package tagged

var M string = N // a type error, only in a darwin build with -tags vz
