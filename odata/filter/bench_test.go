package filter

import "testing"

const benchFilter = `PartitionKey eq 'p1' and RowKey ge 'r100' and Age gt 30 and Name ne 'x'`

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchFilter); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	e, err := Parse(benchFilter)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Compile(e, entitySchema, 3); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		e, err := Parse(benchFilter)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := Compile(e, entitySchema, 3); err != nil {
			b.Fatal(err)
		}
	}
}
