package javaser

// Stream header, from java.io.ObjectStreamConstants.
const (
	StreamMagic   = 0xACED
	StreamVersion = 5
)

// Flags of a class descriptor (ObjectStreamConstants.SC_*).
const (
	SCWriteMethod    byte = 0x01 // class has writeObject: its data ends with an annotation
	SCSerializable   byte = 0x02
	SCExternalizable byte = 0x04
	SCBlockData      byte = 0x08 // Externalizable data written in block-data mode (protocol version 2)
	SCEnum           byte = 0x10
)

// Type codes (ObjectStreamConstants.TC_*).
const (
	tcNull           = 0x70
	tcReference      = 0x71
	tcClassDesc      = 0x72
	tcObject         = 0x73
	tcString         = 0x74
	tcArray          = 0x75
	tcClass          = 0x76
	tcBlockData      = 0x77
	tcEndBlockData   = 0x78
	tcReset          = 0x79
	tcBlockDataLong  = 0x7A
	tcException      = 0x7B
	tcLongString     = 0x7C
	tcProxyClassDesc = 0x7D
	tcEnum           = 0x7E
)

// baseWireHandle is the first handle number; handles count up from it.
const baseWireHandle = 0x7E0000

// maxBlockSize is the largest block ObjectOutputStream writes; longer
// runs of primitive data are split into blocks of this size.
const maxBlockSize = 1024

// maxProxyInterfaces is the JDK's limit on interfaces of a proxy class.
const maxProxyInterfaces = 65535

// DefaultMaxDepth is the nesting limit used when Decoder.MaxDepth is 0.
const DefaultMaxDepth = 512

var tcNames = map[byte]string{
	tcNull:           "TC_NULL",
	tcReference:      "TC_REFERENCE",
	tcClassDesc:      "TC_CLASSDESC",
	tcObject:         "TC_OBJECT",
	tcString:         "TC_STRING",
	tcArray:          "TC_ARRAY",
	tcClass:          "TC_CLASS",
	tcBlockData:      "TC_BLOCKDATA",
	tcEndBlockData:   "TC_ENDBLOCKDATA",
	tcReset:          "TC_RESET",
	tcBlockDataLong:  "TC_BLOCKDATALONG",
	tcException:      "TC_EXCEPTION",
	tcLongString:     "TC_LONGSTRING",
	tcProxyClassDesc: "TC_PROXYCLASSDESC",
	tcEnum:           "TC_ENUM",
}

// tcName names a type code for error messages.
func tcName(b byte) string {
	if n, ok := tcNames[b]; ok {
		return n
	}
	return "invalid type code"
}
