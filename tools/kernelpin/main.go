package main

import (
	"fmt"

	"github.com/capsem/capsem/guest/image"
)

func main() { fmt.Println(image.DefaultKernel) }
