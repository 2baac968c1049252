// Package trace reads and writes packet captures (pcap and pcapng) as
// streams, rebuilds a trace by merging several dumper files on the mirror
// sequence number (the metadata itself is wire format: package roce), and runs
// the four-condition integrity check on the result.
//
// Readers never hold a capture whole in memory and never allocate more than a
// fixed cap whatever the headers claim; bad input yields a *FormatError naming
// the file and the byte offset of the offending record.
package trace
