package inbox_test

func crashChildMain() bool { return false }
