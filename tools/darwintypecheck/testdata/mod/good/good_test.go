package good

import "testing"

func TestN(t *testing.T) { var _ int = N }
