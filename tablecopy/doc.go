// Package tablecopy copies tables between Table endpoints (Azure, Azurite,
// pgtables) and dump directories, exactly: every property keeps its EDM
// type and its value as the protocol writes it. It is the `pgtables copy`
// command's engine; the protocol itself is package tableapi's.
package tablecopy
