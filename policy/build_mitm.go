package policy

// mitm builds [mitm].
func (b *builder) mitm(t *table) {
	if n, ok := b.limit(t, "preview_bytes", MaxPreviewBytes, "mitm.preview_bytes = %d: write a number of bytes from 0 (no previews) to %d (1 MiB); the default is %d", MaxPreviewBytes, DefaultPreviewBytes); ok {
		b.p.previewSet, b.p.previewBytes = true, n
	}
}
