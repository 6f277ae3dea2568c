(* The derivative notions of the development, defined once here, with mathcomp-analysis'
   directional derivative  'D_v f x = lim_{h -> 0} (f (x + h v) - f x) / h  (derive f x v):
   - d1 f v x and d2 f u v x: the first and second directional derivatives, as real numbers
     (wrapping them in definitions of type R keeps elaboration fast in mathcomp-analysis 0.6.0);
   - grad f x := (∂_i f x)_i and hess f x := (∂_i ∂_j f x)_ij, the coordinate directional
     derivatives along the basis vectors e_i of Defs.v.
   They are apart from Defs.v so that the algebraic files do not load mathcomp-analysis.  The local
   hypothesis differentiable_near is defined in T01_analytic.v, beside derive_near_eq, the lemma
   that makes it local.  This file exports Defs (and opens classical_set_scope), so the analytic files import it alone. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From CoupledCurvature Require Export Defs.

Open Scope classical_set_scope.

Section Derivatives.
Variable R : realType.
Variable n : nat.
(* column vectors of size n.+1 with mathcomp-analysis' normed-module structure (mathcomp-analysis
   0.6.0 puts its norm on 'M_(m.+1, n.+1) only) *)
Local Notation V := (matrix_normedModType R n 0).

Definition d1 (f : V -> R^o) (v x : V) : R := derive f x v.
Definition d2 (f : V -> R^o) (u v x : V) : R := derive (fun y : V => (d1 f v y : R^o)) x u.
Definition grad (f : V -> R^o) (x : V) : 'cV[R]_n.+1 := \col_i d1 f (e i) x.
Definition hess (f : V -> R^o) (x : V) : 'M[R]_n.+1 := \matrix_(i, j) d2 f (e i) (e j) x.

End Derivatives.

(* every partial derivative ∂_jL is derivable at w along every coordinate direction: the local
   hypothesis of T9 and T10 on the second derivatives; only parsing, so that the statements
   print it in full *)
Notation partials_derivable L w :=
  (forall i j, derivable (fun y => (d1 L (e j) y : _^o)) w (e i)) (only parsing).

(* Printing only: mathcomp-analysis' column vectors of size n.+1 (V above) print as the MathComp
   type 'cV[R]_(n.+1) (and 'cV[R]_1, 'cV[R]_2 for the sizes of the instances), so that the pinned
   statements read as mathematics rather than as the library's normed-module structure. *)
Notation "''cV[' R ]_ ( n .+1 )" := (matrix_normedModType R n 0)
  (only printing, format "''cV[' R ]_ ( n .+1 )").
Notation "''cV[' R ]_1" := (matrix_normedModType R 0 0) (only printing, format "''cV[' R ]_1").
Notation "''cV[' R ]_2" := (matrix_normedModType R 1 0) (only printing, format "''cV[' R ]_2").
