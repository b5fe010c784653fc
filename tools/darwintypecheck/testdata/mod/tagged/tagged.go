package tagged

var N = 1
