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
