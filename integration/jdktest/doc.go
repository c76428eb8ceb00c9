// Package jdktest runs small Java programs from Go tests.
//
// ckptfs reads and writes bytes that a real JVM produced or must accept
// (Java serialization in Flink's znodes and HA files). Tests prove that
// against the JDK itself rather than against our own reading of the
// specification: they compile Java sources given as strings into a
// temporary directory and run them, feeding stdin and collecting stdout.
//
// When java (or javac) is not on PATH the test is skipped with a message
// on stderr, or fails if the environment variable CKPTFS_REQUIRE_JDK is
// "1", as CI sets it, so that a missing JDK cannot silently turn the proof
// into a skip. In -short mode (make unit) the test is skipped without
// looking.
package jdktest
