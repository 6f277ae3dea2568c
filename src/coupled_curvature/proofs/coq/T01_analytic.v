(* T1, analytic part, with mathcomp-analysis' directional derivative
     'D_v f x = lim_{h -> 0} (f (x + h v) - f x) / h       (derive f x v).
   For a linear map θ |-> M θ on R^n (n >= 1: mathcomp-analysis 0.6.0 puts its norm on
   'M_(m.+1, n.+1) only) and any L : R^n -> R:
   - the first and second directional derivatives of L∘M at θ along v (and u) are those of
     L at Mθ along Mv (and Mu) (no differentiability needed: the difference quotients agree);
   - with grad f x := (∂_i f x)_i and hess f x := (∂_i ∂_j f x)_ij (coordinate directional
     derivatives), if L is differentiable at Mθ then grad (L∘M) θ = Mᵀ grad L (Mθ), and if L is
     differentiable NEAR Mθ and its partials are differentiable at Mθ then
     hess (L∘M) θ = Mᵀ hess L (Mθ) M (local hypotheses: `derive_near_eq`, the derivative at x
     depends only on the function near x);
   - so for a linear symmetry (L∘M = L, M invertible): grad L (Mθ) = M⁻ᵀ grad L θ and
     hess L (Mθ) = M⁻ᵀ hess L θ M⁻¹, the T1 law, whose block version is T01_transformation_law.
   T1_analytic_instance: L(v) = v₀² and M = -1 meet every hypothesis, with Hessian 2. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From CoupledCurvature Require Import DefsAnalytic.

Section Locality.
Variable R : realType.
Variable U : normedModType R.

(* f is differentiable at every point of some neighbourhood of x: a local hypothesis, named so that
   no statement reads as a claim about every point of the space *)
Definition differentiable_near (f : U -> R^o) (x : U) := \forall y \near x, differentiable f y.

Lemma regular_scaleE (a b : R) : (a *: (b : R^o) : R^o) = a * b.
Proof. by []. Qed.

Lemma near_neq0 : \forall h \near (0 : R^o)^', h != 0.
Proof. exact: withinT. Qed.

Lemma near0_gt1 : \forall h \near (0 : R^o)^', 0 < h + 1.
Proof.
move: (@dnbhs0_lt _ [pseudoMetricNormedZmodType R of R^o] 1 ltr01); apply: filterS => h.
rewrite ltr_norml => /andP [h1 _].
by rewrite -ltr_subl_addr sub0r.
Qed.

Lemma shift_cvg (x v : U) : (fun h : R^o => h *: v + x) @ (0 : R^o)^' --> x.
Proof.
apply: cvg_within_filter.
have C : (fun h : R^o => h *: v + x) @ (nbhs (0 : R^o)) --> 0 *: v + x.
  apply: cvgD; last exact: cvg_cst.
  by apply: cvgZl; exact: cvg_id.
by rewrite scale0r add0r in C.
Qed.

(* the difference quotients of two functions equal near x define the same filter at 0 *)
Lemma dq_near_eq (f g : U -> R^o) (x v : U) : (\forall y \near x, f y = g y) ->
  (fun h : R => h^-1 *: ((f \o shift x) (h *: v) - f x)) @ (0 : R^o)^'
  = (fun h : R => h^-1 *: ((g \o shift x) (h *: v) - g x)) @ (0 : R^o)^'.
Proof.
move=> fg; have fgx : f x = g x := nbhs_singleton fg.
have E : \forall h \near (0 : R^o)^', h^-1 *: ((f \o shift x) (h *: v) - f x)
                                   = h^-1 *: ((g \o shift x) (h *: v) - g x).
  have S := @shift_cvg x v; have := S _ fg.
  by apply: (@filterS _ (0 : R^o)^') => h /= ->; rewrite fgx.
apply/funext => P; apply/propext; split => /=.
  by move=> HP; apply: (@filterS2 _ _ _ _ _ _ _ E HP) => h /= <-.
by move=> HP; apply: (@filterS2 _ _ _ _ _ _ _ E HP) => h /= ->.
Qed.

(* the directional derivative at x depends only on the function near x *)
Lemma derive_near_eq (f g : U -> R^o) (x v : U) :
  (\forall y \near x, f y = g y) -> derive f x v = derive g x v.
Proof. by move=> fg; rewrite /derive (dq_near_eq v fg). Qed.

Lemma derivable_near_eq (f g : U -> R^o) (x v : U) :
  (\forall y \near x, f y = g y) -> derivable f x v -> derivable g x v.
Proof. by move=> fg; rewrite /derivable (dq_near_eq v fg). Qed.

End Locality.

Section T1Analytic.
Variable R : realType.
Variable n : nat.
(* column vectors of size n.+1 with mathcomp-analysis' normed-module structure *)
Local Notation V := (matrix_normedModType R n 0).

(* the linear map θ |-> M θ, typed as a map of V *)
Definition mulV (M : 'M[R]_n.+1) (x : V) : V := M *m x.

(* first directional derivative of L∘M *)
Theorem derive_comp_linear (M : 'M[R]_n.+1) (L : V -> R^o) (th v : V) :
  d1 (L \o mulV M) v th = d1 L (mulV M v) (mulV M th).
Proof.
rewrite /d1 /derive /=.
have -> : (fun h : R => h^-1 *: ((L \o mulV M) (h *: v + th) - (L \o mulV M) th))
        = (fun h : R => h^-1 *: (L (h *: (mulV M v) + M *m th) - L (mulV M th))).
  by apply/funext => h /=; rewrite /mulV mulmxDr scalemxAr.
by [].
Qed.

(* second directional derivative of L∘M *)
Theorem derive2_comp_linear (M : 'M[R]_n.+1) (L : V -> R^o) (th u v : V) :
  d2 (L \o mulV M) u v th = d2 L (mulV M u) (mulV M v) (mulV M th).
Proof.
rewrite /d2.
have -> : (fun y : V => (d1 (L \o mulV M) v y : R^o))
        = (fun y : V => (d1 L (mulV M v) y : R^o)) \o mulV M.
  by apply/funext => y /=; rewrite derive_comp_linear.
exact: derive_comp_linear.
Qed.

Lemma cV_sum_delta (v : V) : v = \sum_j v j 0 *: e j.
Proof.
apply/matrixP => a b; rewrite ord1 summxE (bigD1 a) //= big1 => [|j ja].
  by rewrite !mxE !eqxx mulr1 addr0.
by rewrite !mxE (eq_sym a) (negbTE ja) mulr0.
Qed.

(* for a differentiable f, the directional derivative is linear in the direction *)
Lemma derive_grad (f : V -> R^o) (x v : V) :
  differentiable f x -> d1 f v x = (v^T *m grad f x) 0 0.
Proof.
move=> df; rewrite /d1 deriveE // {1}[v]cV_sum_delta linear_sum /= mxE.
apply: eq_bigr => j _; rewrite linearZ /= -deriveE // !mxE /d1.
by [].
Qed.

Lemma row_delta_mul (A : 'M[R]_n.+1) (i : 'I_n.+1) (B : V) :
  ((e i)^T *m (A *m B)) 0 0 = (A *m B) i 0.
Proof. by rewrite /e trmx_delta -rowE mxE. Qed.

Lemma derive_coord (j i : 'I_n.+1) (w : V) :
  derive (fun y : V => (y j 0 : R^o)) w (e i) = (j == i)%:R.
Proof.
rewrite /derive /=; apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])); move: (near_neq0 R); apply: filterS => h h0.
by rewrite !mxE eqxx andbT addrK [_ *: _]mulrA mulVf // mul1r.
Qed.

(* the gradient law of L∘M *)
Theorem grad_comp_linear (M : 'M[R]_n.+1) (L : V -> R^o) (th : V) :
  differentiable L (mulV M th) ->
  grad (L \o mulV M) th = M^T *m grad L (mulV M th).
Proof.
move=> dL; apply/matrixP => i b; rewrite ord1 [LHS]mxE derive_comp_linear.
by rewrite derive_grad // trmx_mul -mulmxA row_delta_mul.
Qed.

Lemma mulV_e_entry (M : 'M[R]_n.+1) (j k : 'I_n.+1) : (mulV M (e j)) k 0 = M k j.
Proof. by rewrite /mulV /e -colE mxE. Qed.

Lemma mulV_e_entryT (M : 'M[R]_n.+1) (j k : 'I_n.+1) : (mulV M (e j))^T 0 k = M k j.
Proof. by rewrite mxE mulV_e_entry. Qed.

(* the Hessian law of L∘M, under local hypotheses at Mθ: L differentiable near Mθ, its partial
   derivatives differentiable at Mθ *)
Theorem hess_comp_linear (M : 'M[R]_n.+1) (L : V -> R^o) (th : V) :
  differentiable_near L (mulV M th) ->
  (forall j, differentiable (fun y : V => (d1 L (e j) y : R^o)) (mulV M th)) ->
  hess (L \o mulV M) th = M^T *m hess L (mulV M th) *m M.
Proof.
move=> dL dD; apply/matrixP => i j; rewrite [LHS]mxE derive2_comp_linear /d2.
pose F k : V -> R^o := fun y => (d1 L (e k) y : R^o).
pose G k : V -> R^o := M k j \*: F k.
rewrite (@derive_near_eq _ _ _ (\sum_k G k)); last first.
  apply: (@filterS _ (nbhs (mulV M th))) dL => y dy.
  rewrite derive_grad // fct_sumE mxE.
  by apply: eq_bigr => k _; rewrite mulV_e_entryT mxE.
rewrite derive_sum; last by move=> k; apply/derivableZ/diff_derivable/dD.
have -> : \sum_k derive (G k) (mulV M th) (mulV M (e i))
        = \sum_k M k j * ((mulV M (e i))^T *m grad (F k) (mulV M th)) 0 0.
  apply: eq_bigr => k _; rewrite deriveZ; last exact/diff_derivable/dD.
  by congr (_ * _); apply: derive_grad; apply: dD.
rewrite mxE; apply: eq_bigr => k _; rewrite mulrC; congr (_ * _).
rewrite /mulV trmx_mul -mulmxA row_delta_mul !mxE; apply: eq_bigr => l _.
by rewrite !mxE.
Qed.

(* the derivative along e_i, at w, of the radial derivative y |-> d1 L y y = Σ_j y_j ∂_jL(y) is
   (H w)_i + g_i, under local hypotheses at w (used by T9 and T10) *)
Lemma derive_radial (L : V -> R^o) (w : V) (i : 'I_n.+1) :
  differentiable_near L w -> partials_derivable L w ->
  derive (fun y : V => (d1 L y y : R^o)) w (e i) = (hess L w *m w) i 0 + grad L w i 0.
Proof.
move=> dL dD.
pose C j : V -> R^o := fun y => y j 0.
pose G j : V -> R^o := fun y => d1 L (e j) y.
pose P j : V -> R^o := C j * G j.
have E : \forall y \near w, (d1 L y y : R^o) = (\sum_j P j) y.
  apply: (@filterS _ (nbhs w)) dL => y dy; rewrite derive_grad // fct_sumE mxE.
  by apply: eq_bigr => j _; rewrite !mxE.
have dC j : derivable (C j) w (e i) by apply/diff_derivable/differentiable_coord.
have dG j : derivable (G j) w (e i) by exact: dD.
rewrite (derive_near_eq _ E) derive_sum => [|j]; last exact: derivableM.
have -> : \sum_j derive (P j) w (e i)
        = \sum_j (w j 0 * hess L w i j + G j w * (j == i)%:R).
  apply: eq_bigr => j _; rewrite deriveM // derive_coord.
  by rewrite /hess mxE /d2.
have S2 : \sum_j G j w * (j == i)%:R = G i w.
  rewrite (bigD1 i) //= eqxx mulr1 big1 ?addr0 // => j /negbTE ->.
  by rewrite mulr0.
rewrite big_split /= S2 [grad _ _ _ _]mxE -/(G i w) mxE; congr (_ + _).
by apply: eq_bigr => j _; rewrite mulrC.
Qed.

(* T1 for a linear symmetry L∘M = L with M invertible *)
Theorem grad_symmetry (M : 'M[R]_n.+1) (L : V -> R^o) (th : V) :
  M \in unitmx -> L \o mulV M = L -> differentiable L (mulV M th) ->
  grad L (mulV M th) = (invmx M)^T *m grad L th.
Proof.
move=> Mu LM dL; rewrite -{2}LM grad_comp_linear // mulmxA -trmx_mul.
by rewrite mulmxV // trmx1 mul1mx.
Qed.

Theorem hess_symmetry (M : 'M[R]_n.+1) (L : V -> R^o) (th : V) :
  M \in unitmx -> L \o mulV M = L ->
  differentiable_near L (mulV M th) ->
  (forall j, differentiable (fun y : V => (d1 L (e j) y : R^o)) (mulV M th)) ->
  hess L (mulV M th) = (invmx M)^T *m hess L th *m invmx M.
Proof.
move=> Mu LM dL dD; rewrite -{2}LM hess_comp_linear // !mulmxA -trmx_mul.
by rewrite mulmxV // trmx1 mul1mx mulmxK.
Qed.

End T1Analytic.

(* the pinned instance of hess_comp_linear / hess_symmetry: L(v) = v₀² on R¹ and the linear
   symmetry M = -1 (L∘M = L).  L is differentiable near every point, its partial derivative
   2v₀ is differentiable, and the Hessian is 2 <> 0. *)
Section T1Instance.
Variable R : realType.
Local Notation V := (matrix_normedModType R 0 0).

Definition sq0 : V -> R^o := (fun v : V => (v 0 0 : R^o)) * (fun v : V => (v 0 0 : R^o)).

Lemma sq0E (v : V) : sq0 v = v 0 0 * v 0 0.
Proof. by []. Qed.

Lemma sq0_d1 : (fun y : V => (d1 sq0 (e 0) y : R^o)) = (2%:R : R) *: (fun v : V => (v 0 0 : R^o)).
Proof.
apply/funext => y; rewrite /d1 deriveM; try exact/diff_derivable/differentiable_coord.
rewrite derive_coord !regular_scaleE eqxx mulr1.
by change (y 0 0 + y 0 0 = 2%:R * y 0 0); rewrite mulr_natl mulr2n.
Qed.

Theorem T1_analytic_instance (th : V) :
  let L : V -> R^o := fun v => v 0 0 ^+ 2 in
  let M : 'M[R]_1 := (-1)%:M in
  [/\ M \in unitmx, L \o mulV M = L,
      differentiable_near L (mulV M th),
      (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) (mulV M th)) &
      hess L (mulV M th) = (2%:R : R)%:M].
Proof.
move=> L M; have EL : L = sq0 by apply/funext => v; rewrite /L expr2.
rewrite EL; split.
- by rewrite unitmxE det_scalar expr1 unitfE oppr_eq0 oner_eq0.
- apply/funext => v; rewrite /= /mulV mul_scalar_mx !sq0E !mxE.
  by rewrite !mulN1r mulrNN.
- by rewrite /differentiable_near; near=> y; apply: differentiableM; exact: differentiable_coord.
- move=> j; rewrite (ord1 j) sq0_d1.
  by apply: differentiableZ; exact: differentiable_coord.
- apply/matrixP => i j; rewrite !ord1 !mxE eqxx mulr1n /d2 sq0_d1.
  change (derive ((2%:R : R) \*: (fun v : V => (v 0 0 : R^o))) (mulV M th) (e 0) = 2%:R).
  rewrite deriveZ; last exact/diff_derivable/differentiable_coord.
  by rewrite derive_coord eqxx regular_scaleE mulr1.
Unshelve. all: by end_near.
Qed.

End T1Instance.
