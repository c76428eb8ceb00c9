package javaser

// Walk calls fn once for every value reachable from roots, depth first,
// children in the order they appear in the stream: objects, strings, arrays, enum constants, classes and class
// descriptors (with the type signatures of their fields). Shared values
// and cycles are visited once. Walk stops at the first error fn returns
// and returns it. It uses no recursion, so depth is not limited.
func Walk(roots []Content, fn func(Value) error) error {
	seen := make(map[Value]struct{})
	var stack []Value
	pushAll := func(cs []Content) {
		for i := len(cs) - 1; i >= 0; i-- {
			if v, ok := cs[i].(Value); ok && !isNil(v) {
				stack = append(stack, v)
			}
		}
	}
	pushAll(roots)
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := seen[v]; ok {
			continue
		}
		seen[v] = struct{}{}
		if err := fn(v); err != nil {
			return err
		}
		// Children are pushed in reverse so that they pop in stream order.
		var kids []Content
		switch v := v.(type) {
		case *Object:
			kids = append(kids, v.Class)
			for _, d := range v.Data {
				for _, x := range d.Values {
					if x, ok := x.(Value); ok {
						kids = append(kids, x)
					}
				}
				kids = append(kids, d.Annotation...)
			}
		case *Array:
			kids = append(kids, v.Class)
			for _, x := range v.Values() {
				kids = append(kids, x)
			}
		case *Enum:
			kids = append(kids, v.Class, v.Constant)
		case *Class:
			kids = append(kids, v.Desc)
		case *ClassDesc:
			for _, f := range v.Fields {
				if f.Type != nil {
					kids = append(kids, f.Type)
				}
			}
			kids = append(kids, v.Annotation...)
			if v.Super != nil {
				kids = append(kids, v.Super)
			}
		}
		pushAll(kids)
	}
	return nil
}

// Walk calls fn for every value reachable from the stream's contents; see
// the package-level Walk.
func (s *Stream) Walk(fn func(Value) error) error { return Walk(s.Contents, fn) }

// Objects returns every object reachable from the stream, once each, in
// stream order.
func (s *Stream) Objects() []*Object {
	var out []*Object
	s.Walk(func(v Value) error {
		if o, ok := v.(*Object); ok {
			out = append(out, o)
		}
		return nil
	})
	return out
}
