package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"withruntime.dev/runtime/internal/api"
)

func newVolumeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "volume", Short: "Manage volumes: storage that outlives sandboxes (sandbox create --volume NAME:PATH)"}
	var sizeMiB int64
	create := &cobra.Command{
		Use:   "create NAME --size-mib N",
		Short: "Make an empty volume of N MiB (a hard quota on its files)",
		Long: "Makes an empty volume owned by this key. Mount it with\n" +
			"`withruntime sandbox create --volume NAME:/data` (`:ro` for read-only); several sandboxes may\n" +
			"mount it at once, and its files outlive them. Its size counts in the key's disk quota and is\n" +
			"billed at the storage price until it is deleted.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sizeMiB <= 0 {
				return usageError{err: errors.New("--size-mib is required: the volume's size in MiB (at least 16)"), cmd: cmd}
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.CreateVolume(cmd.Context(), args[0], sizeMiB)
			if err != nil {
				return err
			}
			fmt.Println(v.Name)
			return nil
		},
	}
	create.Flags().Int64Var(&sizeMiB, "size-mib", 0, "the volume's size in MiB (at least 16)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List this key's volumes with what their files take and who mounts them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			vols, err := s.ListVolumes(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSIZE\tUSED\tSTATE\tMOUNTED BY\tCREATED")
			for _, v := range vols {
				by := strings.Join(v.MountedBy, ",")
				if by == "" {
					by = "-"
				}
				fmt.Fprintf(tw, "%s\t%d MiB\t%s\t%s\t%s\t%s\n", v.Name, v.SizeMiB, mib(v.UsedBytes), v.State, by, v.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a volume and its files (refused while a sandbox mounts it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			return s.DeleteVolume(cmd.Context(), args[0])
		},
	}
	cmd.AddCommand(create, ls, rm, newVolumeCpCmd())
	return cmd
}

// mib writes a size in bytes as MiB with one decimal ("12.5 MiB").
func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }

// parseVolumeFlag reads a --volume NAME:PATH[:ro|:rw].
func parseVolumeFlag(s string) (api.VolumeMount, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return api.VolumeMount{}, fmt.Errorf("--volume %q: want NAME:PATH or NAME:PATH:ro, such as cache:/data or models:/models:ro", s)
	}
	m := api.VolumeMount{Name: parts[0], Path: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			m.ReadOnly = true
		case "rw":
		default:
			return api.VolumeMount{}, fmt.Errorf("--volume %q: the third part is ro (read-only) or rw; got %q", s, parts[2])
		}
	}
	return m, nil
}
