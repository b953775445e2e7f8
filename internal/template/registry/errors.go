package registry

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// isNotFound says whether a registry answered that the image does not
// exist.
func isNotFound(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == http.StatusNotFound {
			return true
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return true
			}
		}
	}
	return false
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
