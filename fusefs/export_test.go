package fusefs

// SetTestHookWritten runs hook after every WRITE reached the backing
// file, before the write releases its hold on the mode; nil removes it.
func SetTestHookWritten(hook func()) {
	if hook == nil {
		testHookWritten.Store(nil)
		return
	}
	testHookWritten.Store(&hook)
}

// SetTestHookReadBack runs hook before each written file is read back
// for its checksum; nil removes it.
func SetTestHookReadBack(hook func()) {
	if hook == nil {
		testHookReadBack.Store(nil)
		return
	}
	testHookReadBack.Store(&hook)
}
