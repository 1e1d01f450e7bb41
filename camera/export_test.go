package camera

// ToRGB exposes toRGB to the tests.
var ToRGB = toRGB
