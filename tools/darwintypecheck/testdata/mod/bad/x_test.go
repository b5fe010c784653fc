package bad_test
